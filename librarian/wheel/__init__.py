"""Reading and rewriting wheels: the zip itself (``zipraw``: local headers, inflating, the zip-bomb policy;
``zipwriter``: raw copies), METADATA and WHEEL (``wheelfile``), RECORD checks (``record``), ``retag``, the
native and device code inside (``binaries``, over the ``elf``, ``pe``, ``macho``, ``fatbin`` and ``cubin``
readers), all of it in one pass (``deep``), and variant wheels (``variant``).

Everything outside this package uses the names below and nothing else (``tests/test_code_health.py`` holds
the rest of librarian to that): an :class:`OpenedWheel` carries its zip directory from one read to the next.
They are imported on first use, so that a command that reads no wheel loads no reader.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names, for type checkers; at run time they are loaded on first use
    from librarian.wheel.deep import DeepRead
    from librarian.wheel.elf_symbols import Exports, dynamic_symbols, glibc_symbols, version_definitions
    from librarian.wheel.fatbin import sampled_toolkits
    from librarian.wheel.members import inspect_path, inspect_wheel
    from librarian.wheel.metadata_checks import metadata_problems, warn_of_links
    from librarian.wheel.opened import OpenedWheel
    from librarian.wheel.ownership import TORCH_ENVIRONMENT, foreign_members, ownership_problem
    from librarian.wheel.record import digest_field
    from librarian.wheel.relabel import Rewritten, retag
    from librarian.wheel.variant import build_digest, variant_problems, write_variant
    from librarian.wheel.wheelfile import WheelInfo, said_of, torch_requirement

_FACE = {
    "OpenedWheel": "opened",
    "TORCH_ENVIRONMENT": "ownership",
    "foreign_members": "ownership",
    "ownership_problem": "ownership",
    "DeepRead": "deep",
    "digest_field": "record",
    "Rewritten": "relabel",
    "WheelInfo": "wheelfile",
    "inspect_path": "members",
    "inspect_wheel": "members",
    "retag": "relabel",
    "said_of": "wheelfile",
    "metadata_problems": "metadata_checks",
    "warn_of_links": "metadata_checks",
    "torch_requirement": "wheelfile",
    "write_variant": "variant",
    "build_digest": "variant",
    "variant_problems": "variant",
    "dynamic_symbols": "elf_symbols",
    "Exports": "elf_symbols",
    "glibc_symbols": "elf_symbols",
    "sampled_toolkits": "fatbin",
    "version_definitions": "elf_symbols",
}

__all__ = [
    "TORCH_ENVIRONMENT",
    "DeepRead",
    "Exports",
    "OpenedWheel",
    "Rewritten",
    "WheelInfo",
    "build_digest",
    "digest_field",
    "dynamic_symbols",
    "foreign_members",
    "glibc_symbols",
    "inspect_path",
    "inspect_wheel",
    "metadata_problems",
    "ownership_problem",
    "retag",
    "said_of",
    "sampled_toolkits",
    "torch_requirement",
    "variant_problems",
    "version_definitions",
    "warn_of_links",
    "write_variant",
]


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'librarian.wheel' has no attribute {name!r}")
    return getattr(importlib.import_module(f"librarian.wheel.{module}"), name)
