"""Reading and rewriting wheels: the zip itself (``zipraw``: local headers, inflating, the zip-bomb policy;
``zipwriter``: raw copies), METADATA and WHEEL (``wheelfile``), RECORD checks (``record``), ``retag``, the
native and device code inside (``binaries``, over the ``elf``, ``fatbin`` and ``cubin`` readers), and all of
it in one pass (``deep``)."""
