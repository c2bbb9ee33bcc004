"""Reading and rewriting wheels: the zip itself (``zipraw``), METADATA/RECORD and retag (``wheelfile``), and
the native and device code inside (``binaries``, over the ``elf``, ``fatbin`` and ``cubin`` readers)."""
