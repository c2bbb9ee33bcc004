"""Reading and rewriting wheels: the zip itself and the zip-bomb policy (``zipraw``), METADATA and WHEEL
(``wheelfile``), RECORD checks (``record``), retag (``retag``), the native and device code inside
(``binaries``, over the ``elf``, ``fatbin`` and ``cubin`` readers), and all of it in one pass (``deep``)."""
