"""A machine's side: ``pull`` (and ``pull --build``, ``pull --fix``), what an installer is handed,
``doctor`` of a wheel and of an environment, and the reading of an environment's installed distributions.
Imports: ``ops`` core modules, ``ops.store`` and ``ops.build`` (``pull --build``); never ``ops.grid``.
"""
