"""What CPython 3.10 lacks and librarian needs: ``tomllib`` (3.11), taken from ``tomli`` there."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - CPython 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
