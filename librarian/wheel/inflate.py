"""The one place that chooses how deflate streams are inflated and CRC-32s computed: every reader of a
wheel's members (``zipraw``) goes through :func:`engine`.

Inflating is the floor of everything librarian does to a wheel's bytes (inspect, verified retag, verify
``--deep``, publish). The stdlib's zlib is not the fastest inflater a Python program can use: ISA-L
(``isal`` on PyPI) inflates the same bytes in about 0.45x its time, zlib-ng (``zlib-ng``) in about 0.6x
(benchmarks/bench_inflate.py). The first one installed is used; the stdlib's zlib always works.
``LIBRARIAN_INFLATE=zlib`` (or ``isal``, ``zlib-ng``) forces one, which is how the tests exercise the
fallback. ``isal`` is a dependency wherever it publishes wheels (pyproject.toml's marker), so users get
it without asking and no platform is asked to build it from source.
"""

from __future__ import annotations

import functools
import importlib
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from librarian.errors import BadInput

# Fastest first. Each module offers zlib's decompressobj(wbits) with decompress(data, max_length),
# unconsumed_tail and eof, crc32(data, value) and its own error class.
_MODULES = {"isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng", "zlib": "zlib"}


@dataclass(frozen=True, slots=True)
class Engine:
    """One inflater: ``decompressobj(wbits)``, ``crc32(data, value)`` and the errors its streams raise."""

    name: str
    decompressobj: Callable[[int], Any]
    crc32: Callable[..., int]
    errors: tuple[type[Exception], ...]


def _load(name: str) -> Engine | None:
    try:
        module = importlib.import_module(_MODULES[name])
    except ImportError:
        return None
    return Engine(name, module.decompressobj, module.crc32, (zlib.error, module.error))


@functools.cache
def engine() -> Engine:
    """The inflater to use: ``LIBRARIAN_INFLATE`` if set, else the fastest one installed."""
    forced = os.environ.get("LIBRARIAN_INFLATE", "").strip().lower()
    if forced:
        if forced not in _MODULES:
            raise BadInput(f"LIBRARIAN_INFLATE={forced}: expected one of {', '.join(_MODULES)}")
        found = _load(forced)
        if found is None:
            raise BadInput(f"LIBRARIAN_INFLATE={forced}: not installed here (pip install {forced})")
        return found
    for name in _MODULES:
        if (found := _load(name)) is not None:
            return found
    raise AssertionError("the stdlib's zlib is always there")  # pragma: no cover
