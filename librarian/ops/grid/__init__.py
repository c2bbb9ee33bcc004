"""The grid: ``plan``, the build jobs a store lacks, with what the store remembers of earlier builds (their
times, their failures, their sources) and jobs cut to fit a budget. Imports: ``ops`` core modules,
``ops.store`` and ``ops.build`` (a job is a build request); never ``ops.machine``.
"""
