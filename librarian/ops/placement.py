"""Where a wheel is filed against where the layout and its filename say it belongs; a store problem as a value.

Pure (names and the layout, no bytes): ``reindex`` and ``pull`` use it without loading the binary readers
that ``verify --deep`` needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from librarian.coords import WheelName
from librarian.errors import LibrarianError
from librarian.layout import Layout


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """One mismatch found: the store path and what is wrong with it (``also``: the same bytes filed elsewhere)."""

    path: str
    problem: str
    also: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the problem is found at."""
        return (self.path, *self.also)

    def __str__(self) -> str:
        # A count, not the paths: a wheel filed in 40 cells would make a line of kilobytes (--json lists them).
        n = len(self.also)
        where = (
            f"{self.path} (and {n} other path{'s' if n != 1 else ''} with the same bytes)" if n else self.path
        )
        return f"{where}: {self.problem}"


@dataclass(frozen=True, slots=True, order=True)
class Accepted:
    """A check a publish overrode, by the flag its index entry records: reported, not a problem."""

    path: str
    flag: str
    finding: str

    def __str__(self) -> str:
        return f"{self.path}: accepted at publish ({self.flag}): {self.finding}"


def check_placement(layout: Layout, path: str) -> list[str]:
    """Pure: the problems of a wheel path against the layout and its own filename."""
    parsed = layout.parse_path(path)
    if parsed is None:
        return [f"not where layout {layout.name!r} puts wheels ({layout.path})"]
    cell, filename = parsed
    try:
        name = WheelName.parse(filename)
    except LibrarianError as e:
        return [str(e).split(": ", 1)[-1]]
    problems = []
    if name.package != cell.package:
        problems.append(f"wheel of {name.package} filed under package {cell.package}")
    if name.label is None:
        claim = f"+{name.version.local}" if name.version.local else "no local label"
        problems.append(f"filename carries {claim}, not a librarian label (expected +{cell.label})")
    elif name.label != cell.label:
        problems.append(f"labelled {name.label} but filed under {cell.label.combo}")
    return problems
