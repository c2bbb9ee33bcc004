"""Layouts: data (TOML) that maps a wheel's cell to a path in a store, and a path back to its cell.

A layout file holds one ``[layout]`` table with ``name``, ``description`` and ``path``, a template over
the fields ``{package}``, ``{sm}``, ``{torch}``, ``{cuda}`` and ``{filename}``. Every field must appear
exactly once and ``{filename}`` must be the last path component, so that a path parses back to exactly
the cell it was made from.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from librarian.compat import tomllib
from librarian.coords import Cell, GpuArch, Label, format_cuda, format_version
from librarian.errors import BadInput, LayoutError

FIELDS = ("package", "sm", "torch", "cuda", "filename")
_FIELD_PATTERNS = {
    "package": r"[a-z0-9_]+",
    "sm": r"\d{2,3}[af]?",
    "torch": r"\d+\.\d+",
    "cuda": r"\d{2,3}",
    "filename": r"[^/]+\.whl",
}
_KNOWN_KEYS = {"name", "description", "path"}


def check_path_part(part: str, what: str) -> None:
    """Refuse a value that would escape its place in the store: ``..``, ``/``, ``\\``, empty, control chars."""
    if not part or part in {".", ".."} or any(c in part for c in "/\\\0") or part != part.strip():
        raise LayoutError(f"{part!r}: not a safe {what} (it would escape the layout)")
    if any(ord(c) < 32 for c in part):
        raise LayoutError(f"{part!r}: not a safe {what} (control characters)")


def check_store_path(path: str) -> None:
    """Refuse a store path that is absolute, has empty parts, ``.``/``..`` or backslashes."""
    if path.startswith("/") or not path:
        raise LayoutError(f"{path!r}: not a relative store path")
    for part in path.split("/"):
        check_path_part(part, "path component")


@dataclass(frozen=True, slots=True)
class Layout:
    """A named path template; :meth:`path_for` and :meth:`parse_path` are inverses."""

    name: str
    path: str
    description: str = ""

    def __post_init__(self) -> None:
        for field in FIELDS:
            if self.path.count("{" + field + "}") != 1:
                raise LayoutError(
                    f"layout {self.name!r}: path must use {{{field}}} exactly once: {self.path}"
                )
        unknown = set(re.findall(r"\{([^}]*)\}", self.path)) - set(FIELDS)
        if unknown:
            raise LayoutError(f"layout {self.name!r}: unknown fields {sorted(unknown)} in {self.path}")
        if not self.path.endswith("/{filename}") or self.path.startswith("/"):
            raise LayoutError(f"layout {self.name!r}: path must be relative and end in /{{filename}}")

    @classmethod
    def from_toml(cls, text: str, source: str) -> Layout:
        """Parse a layout file's text; ``source`` names the file in errors."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise LayoutError(f"{source}: not valid TOML ({e})") from e
        except RecursionError as e:
            raise LayoutError(f"{source}: not valid TOML (nested too deeply)") from e
        if set(data) != {"layout"} or not isinstance(data["layout"], dict):
            raise LayoutError(f"{source}: expected exactly one [layout] table, found {sorted(data)}")
        table = data["layout"]
        unknown = set(table) - _KNOWN_KEYS
        if unknown:
            raise LayoutError(f"{source}: unknown fields in [layout]: {', '.join(sorted(unknown))}")
        missing = {"name", "path"} - set(table)
        if missing:
            raise LayoutError(f"{source}: missing fields in [layout]: {', '.join(sorted(missing))}")
        if not all(isinstance(v, str) for v in table.values()):
            raise LayoutError(f"{source}: [layout] values must be strings")
        try:
            return cls(table["name"], table["path"], table.get("description", ""))
        except LayoutError as e:
            raise LayoutError(f"{source}: {e}") from e

    def path_for(self, cell: Cell, filename: str) -> str:
        """The store path of ``filename`` in ``cell``; refuses anything that would escape the layout."""
        values = {
            "package": cell.package,
            "sm": cell.sm.sm,
            "torch": format_version(cell.label.torch),
            "cuda": format_cuda(cell.label.cuda),
            "filename": filename,
        }
        for field, value in values.items():
            check_path_part(value, field)
            if not re.fullmatch(_FIELD_PATTERNS[field], value):
                raise LayoutError(f"{value!r}: not a valid {field} for layout {self.name!r}")
        path = self.path.format(**values)
        check_store_path(path)
        if self.parse_path(path) != (cell, filename):  # the promise: a path parses back to its cell
            raise LayoutError(f"{path}: does not parse back to {cell}")
        return path

    def parse_path(self, path: str) -> tuple[Cell, str] | None:
        """The (cell, filename) a store path stands for, or ``None`` if it is not a path of this layout."""
        m = self._regex().fullmatch(path)
        if m is None:
            return None
        try:
            cell = Cell(
                package=m["package"],
                sm=GpuArch.parse(m["sm"]),
                label=Label.parse(f"cu{m['cuda']}torch{m['torch']}"),
            )
        except BadInput:
            return None
        return cell, m["filename"]

    def _regex(self) -> re.Pattern[str]:
        pattern = ""
        for literal, field, _, _ in string.Formatter().parse(self.path):
            pattern += re.escape(literal)
            if field:
                pattern += f"(?P<{field}>{_FIELD_PATTERNS[field]})"
        return re.compile(pattern)
