"""What the store remembers of earlier builds, as plan weighs it. Pure.

- A missing cell whose build failed before (a failure record of its package, version, combo and GPU) with
  the same recipe (builder image, torch install line) and, where plan is told what the jobs build
  (``--source``), the same source, is *failed*: left out of the jobs, since it would fail again for hours,
  until the source or the recipe changes or ``--retry-failed`` asks.
- A held cell whose wheel was built from another source of the same version than ``--source`` (its entry's
  build record) is said; ``--rebuild-other-source`` plans it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from librarian.build_failure import BuildFailure
from librarian.build_record import Source
from librarian.coords import package_key
from librarian.index import Index
from librarian.ops.build.build_request import BuildRequest
from librarian.ops.holdings import Cell, Held, Spec


@dataclass(frozen=True, slots=True)
class FailedCell:
    """A missing cell left out of the jobs: the failure that was recorded for it."""

    cell: Cell
    failure: BuildFailure


def _key(cell: Cell) -> tuple[str, str, str]:
    """The cell as a failure record names it: package, version, and the combo as a build names its
    environment (``cp312-torch2.9-cu128-linux-x86_64``)."""
    request = BuildRequest(cell.spec.text, cell.combo, (cell.sm,))
    return (package_key(cell.spec.package), str(cell.spec.version), request.env_name)


def recipe_of(cell: Cell) -> str:
    """The recipe a job for ``cell`` would build with (the same words a failure record keeps)."""
    return BuildRequest(cell.spec.text, cell.combo, (cell.sm,)).recipe


def failed_cells(
    missing: Sequence[Cell], failures: Iterable[BuildFailure], source_of: dict[Spec, Source], retry: bool
) -> tuple[list[Cell], list[FailedCell]]:
    """The missing cells still to build, and those a failure of the same source and recipe leaves out
    (none with ``retry``: every cell is built again)."""
    by_key: dict[tuple[str, str, str], list[BuildFailure]] = {}
    for f in failures:
        c = f.cells
        by_key.setdefault((c.package, c.version, c.combo_name), []).append(f)
    if retry or not by_key:
        return list(missing), []
    still: list[Cell] = []
    failed: list[FailedCell] = []
    for cell in missing:
        same = [
            f
            for f in by_key.get(_key(cell), [])
            if str(cell.sm.sm) in f.cells.sms
            and (cell.spec not in source_of or f.source.key == source_of[cell.spec].key)
            and f.recipe == recipe_of(cell)
        ]
        if same:
            failed.append(FailedCell(cell, max(same, key=lambda f: f.date)))
        else:
            still.append(cell)
    return still, failed


def other_source(
    held: Sequence[Held], index: Index, source_of: dict[Spec, Source]
) -> list[tuple[Held, Source]]:
    """The held cells whose wheel's build record names another source than the plan's, with that source."""
    by_path = index.by_path()
    found = []
    for h in held:
        entry = by_path.get(h.path)
        record = entry.build if entry is not None else None
        mine = source_of.get(h.cell.spec)
        if record is not None and mine is not None and record.source.key != mine.key:
            found.append((h, record.source))
    return found
