"""Where a wheel is filed against where the layout and its filename say it belongs; a store problem as a value.

Pure (names and the layout, no bytes): ``reindex`` and ``pull`` use it without loading the binary readers
that ``verify --deep`` needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from librarian.coords import Cell, WheelName
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
    if (problem := path_problem(layout, path)) is not None:
        return [problem]
    parsed = layout.parse_path(path)
    assert parsed is not None  # path_problem said it parses
    clash = label_clash(WheelName.parse(parsed[1]), parsed[0])
    return [clash] if clash is not None else []


def path_problem(layout: Layout, path: str) -> str | None:
    """Pure: why a store path holds no wheel of the cell it names (no cell at all, a filename that is no
    wheel's, another package's wheel), before its label or bytes are looked at; ``None`` where it does."""
    parsed = layout.parse_path(path)
    if parsed is None:
        return f"not where layout {layout.name!r} puts wheels ({layout.path})"
    cell, filename = parsed
    try:
        name = WheelName.parse(filename)
    except LibrarianError as e:
        return str(e).split(": ", 1)[-1]
    if name.package != cell.package:
        return f"wheel of {name.package} filed under package {cell.package}"
    return None


def label_clash(name: WheelName, cell: Cell) -> str | None:
    """Pure: where the filename's own label says another torch or CUDA line than the cell's path; ``None``
    where they agree or the filename carries no label (in a wheelhouse the path is then the claim, as
    hand-made wheelhouses file their wheels)."""
    if name.label is not None:
        return (
            None if name.label == cell.label else f"labelled {name.label} but filed under {cell.label.combo}"
        )
    claim = name.label_claim  # another project's form (+cu12torch2.8cxx11abiTRUE, +pt28cu128): its parts
    if claim is None:
        return None
    cuda, torch = cell.label.cuda, cell.label.torch
    agrees = (
        claim.cuda_major == cuda[0] and claim.cuda_minor in (None, cuda[1]) and claim.torch in (None, torch)
    )
    return None if agrees else f"its {claim} contradicts its path's {cell.label.combo}"
