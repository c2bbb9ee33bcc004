"""tinykern: a tiny CUDA vector-add kernel in a shared library, loaded with ctypes (no torch needed).

``load()`` needs the CUDA 13 runtime (``libcudart.so.13``) on the loader path; ``add()`` needs a GPU the
library has code for (sm_80, sm_86, sm_89, sm_90, or newer through the compute_90 PTX).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

__version__ = "0.1.0"
__all__ = ["add", "device_count", "library_path", "load"]


def library_path() -> Path:
    """Where this package's shared library is."""
    return Path(__file__).with_name("_tinykern.so")


@functools.cache
def load() -> ctypes.CDLL:
    """Load the shared library (OSError if libcudart.so.13 cannot be found)."""
    lib = ctypes.CDLL(str(library_path()))
    floats = ctypes.POINTER(ctypes.c_float)
    lib.tinykern_add.argtypes = [floats, floats, floats, ctypes.c_int]
    lib.tinykern_add.restype = ctypes.c_int
    lib.tinykern_device_count.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.tinykern_device_count.restype = ctypes.c_int
    lib.tinykern_error_string.argtypes = [ctypes.c_int]
    lib.tinykern_error_string.restype = ctypes.c_char_p
    return lib


def _check(lib: ctypes.CDLL, code: int) -> None:
    if code:
        raise RuntimeError(f"CUDA error {code}: {lib.tinykern_error_string(code).decode()}")


def device_count() -> int:
    """How many CUDA devices the runtime sees (RuntimeError with CUDA's message if it cannot ask)."""
    lib = load()
    count = ctypes.c_int(0)
    _check(lib, lib.tinykern_device_count(ctypes.byref(count)))
    return count.value


def add(a: list[float], b: list[float]) -> list[float]:
    """``a + b`` element-wise, computed on the GPU."""
    if len(a) != len(b):
        raise ValueError(f"lengths differ: {len(a)} and {len(b)}")
    lib = load()
    n = len(a)
    arrays = [(ctypes.c_float * n)(*a), (ctypes.c_float * n)(*b), (ctypes.c_float * n)()]
    _check(lib, lib.tinykern_add(*arrays, n))
    return list(arrays[2])
