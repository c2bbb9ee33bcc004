"""The use cases, one package each, over a few modules they all share.

    store/    a store's upkeep: publish (and staging, the fan-in, intake), gc, reindex, verify, ls, failure records
    build/    build and pull --build: the environment, the source, the bounded compile, the compile cache
    grid/     plan: the jobs a store lacks, their estimates and budget, what the store remembers of builds
    machine/  pull, pull --fix, the installer's command line, doctor and doctor --env

Shared here: ``resolve`` (which stored wheel a machine takes), ``holdings`` (which cells an index holds),
``labels`` and ``retag`` (a wheel's label), ``inspect``, ``inputs`` (the files a command is given) and
``released_shims``. ``store`` imports no other package here; ``build`` imports ``store``; ``grid`` and
``machine`` import both (``tests/test_layering.py`` holds them to it).
"""
