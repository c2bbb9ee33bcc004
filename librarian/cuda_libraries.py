"""The CUDA toolkit libraries besides the runtime that bind a wheel to CUDA majors: ``libnvrtc.so.12``,
``libcublas.so.13``, ``cufft64_11.dll``, ... each with the CUDA majors whose toolkit ships that file, as
``librarian/data/cuda_libraries.toml`` lists them (read from the nvidia-* wheels). Data, checked on load.
"""

from __future__ import annotations

import functools
from importlib import resources

from librarian.compat import tomllib
from librarian.errors import BadInput


def parse_libraries(text: str, source: str) -> dict[str, frozenset[int]]:
    """The table from TOML text: ``[libraries]`` file name (lower case) -> the CUDA majors that ship it."""
    try:
        rows = tomllib.loads(text)["libraries"]
        table = {str(name).lower(): frozenset(int(m) for m in majors) for name, majors in rows.items()}
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{source}: not a CUDA library table ({e})") from e
    if not table or any(not majors or min(majors) < 7 for majors in table.values()):
        raise BadInput(f"{source}: not a CUDA library table (a library with no CUDA major)")
    return table


@functools.cache
def _table() -> dict[str, frozenset[int]]:
    text = resources.files("librarian").joinpath("data/cuda_libraries.toml").read_text(encoding="utf-8")
    return parse_libraries(text, "librarian/data/cuda_libraries.toml")


def cuda_majors_of(library: str) -> frozenset[int] | None:
    """The CUDA majors whose toolkit ships ``library`` (a linked file name: ``libnvrtc.so.12``, or a path
    to one); ``None`` for a library that binds no CUDA line."""
    return _table().get(library.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower())
