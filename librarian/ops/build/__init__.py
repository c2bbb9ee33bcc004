"""The build use case: ``build`` and ``pull --build``. A combo's environment made and reused, torch
installed and checked, the source staged, the compile run bounded (and behind the compile cache), the wheel
held to what was asked, repaired when asked, and what the build was made from recorded; filing it is the
store's (:mod:`librarian.ops.store`). Imports: ``ops`` core modules and ``ops.store``; never ``ops.machine``
or ``ops.grid``.
"""
