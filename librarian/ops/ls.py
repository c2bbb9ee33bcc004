"""ls: what a store holds, as a coverage table (packages x combos x sm) that shows the holes, and how
many files that is against the Hub's guidance of 100k files per repo (warned past 80%)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from librarian.catalogue import catalogue_paths
from librarian.coords import package_key
from librarian.index import Index, IndexEntry
from librarian.layout import Layout
from librarian.stores.base import Store, read_index

log = logging.getLogger(__name__)

HOLE = "-"
# huggingface.co's guidance: repos under 100k files, folders under 10k entries, commits under ~100 files.
FILE_GUIDANCE = 100_000
WARN_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class Coverage:
    """Per (package, combo) row and sm column, the wheels stored there."""

    location: str
    sms: tuple[str, ...]  # column heads: "80", "89", "90a", sorted by number
    rows: dict[tuple[str, str], dict[str, list[IndexEntry]]]  # (package, combo) -> sm -> entries
    files: int | None = None  # the store's files the index accounts for (wheels, index, pages); None: not counted


def coverage(index: Index, location: str) -> Coverage:
    """Pure: group the index into the coverage table."""
    rows: dict[tuple[str, str], dict[str, list[IndexEntry]]] = defaultdict(lambda: defaultdict(list))
    sms: set[tuple[int, str]] = set()
    for e in index.entries:
        rows[(e.cell.package, e.cell.label.combo)][e.cell.sm.sm].append(e)
        sms.add((e.cell.sm.number, e.cell.sm.sm))
    ordered = dict(sorted(rows.items(), key=lambda kv: (kv[0][0], _combo_key(kv[0][1]))))
    return Coverage(location, tuple(s for _, s in sorted(sms)), ordered)


def _combo_key(combo: str) -> tuple[int, ...]:
    torch, cuda = combo.removeprefix("torch").split("-cu")
    return (*(-int(x) for x in torch.split(".")), -int(cuda))


def _cell_text(entries: list[IndexEntry]) -> str:
    if not entries:
        return HOLE
    newest = max(e.name.version for e in entries)
    pythons = sorted({t.interpreter for e in entries if e.name.version == newest for t in e.name.tags})
    short = ",".join(p.removeprefix("cp") for p in pythons)
    return f"{newest.public} ({short})"


def render_coverage(cov: Coverage) -> str:
    """A text table: one row per package and combo, one column per sm; ``-`` marks a hole."""
    if not cov.rows:
        return f"{cov.location}: no wheels stored"
    head = ["package", "torch-cuda", *(f"sm{s}" for s in cov.sms)]
    table = [head]
    for (package, combo), cells in cov.rows.items():
        table.append([package, combo, *(_cell_text(cells.get(s, [])) for s in cov.sms)])
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    count = sum(len(es) for cells in cov.rows.values() for es in cells.values())
    holes = sum(1 for cells in cov.rows.values() for s in cov.sms if not cells.get(s))
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(
        f"{count} wheel file(s) in {cov.location}; {holes} hole(s) marked {HOLE}; cells show newest version (python tags)"
    )
    return "\n".join(lines)


def coverage_json(cov: Coverage) -> dict[str, Any]:
    """The coverage as JSON (``"schema": 1``), with every wheel listed."""
    packages: dict[str, Any] = defaultdict(dict)
    for (package, combo), cells in cov.rows.items():
        packages[package][combo] = {
            f"sm{s}": [e.to_json() for e in sorted(cells.get(s, []), key=lambda e: e.path)] for s in cov.sms
        }
    data: dict[str, Any] = {"schema": 1, "repo": cov.location, "sms": [f"sm{s}" for s in cov.sms], "packages": dict(packages)}
    if cov.files is not None:
        data["files"] = {"count": cov.files, "guidance": FILE_GUIDANCE, "share": round(cov.files / FILE_GUIDANCE, 4),
                         "warning": cov.files > WARN_SHARE * FILE_GUIDANCE}  # fmt: skip
    return data


def store_files(index: Index) -> int:
    """Pure: the files a store holds for ``index``: each wheel path, shard, page and the root index."""
    return len(index.entries) + len(catalogue_paths(index))


def ls(store: Store, default_layout: Layout, packages: Sequence[str] = ()) -> Coverage:
    """The coverage of ``packages`` (all when empty)."""
    keys = [package_key(p) for p in packages] or None
    index = read_index(store, default_layout, keys)
    cov = coverage(index, store.location)
    if keys is not None:
        return cov  # only some shards were read: the whole store's count is unknown
    files = store_files(index)
    if files > WARN_SHARE * FILE_GUIDANCE:
        log.warning("%s: %d files, %.0f%% of the Hub's guidance of %d files per repo; 'gc' frees some",
                    store.location, files, 100 * files / FILE_GUIDANCE, FILE_GUIDANCE)  # fmt: skip
    return replace(cov, files=files)
