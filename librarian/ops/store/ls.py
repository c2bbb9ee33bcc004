"""ls: what a store holds, as a coverage table (packages x combos x sm) that shows the holes, and how
many files that is against the Hub's guidance of 100k files per repo (warned past 80%)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from librarian.catalogue import catalogue_paths, wheel_of
from librarian.coords import MajorMinor, format_version, package_key
from librarian.coverage import Coverage, coverage
from librarian.errors import NotFound
from librarian.index import Index
from librarian.index_files import ROOT, adopt_hint
from librarian.layout import Layout
from librarian.ops.store.tree import is_wheel
from librarian.stores.base import Store, read_index

log = logging.getLogger(__name__)

# huggingface.co's guidance: repos under 100k files, folders under 10k entries, commits under ~100 files.
FILE_GUIDANCE = 100_000
WARN_SHARE = 0.8


# 2: each stored wheel once (``wheels``), its facts once per sha256 (``facts``); cells list paths.
LS_SCHEMA = 2


def coverage_json(cov: Coverage) -> dict[str, Any]:
    """The coverage as JSON: every stored wheel once with its cell, the binary facts once per sha256 (the same
    bytes filed in several cells share them), and the table of packages x combos x GPUs as paths."""
    packages: dict[str, Any] = defaultdict(dict)
    wheels: dict[str, dict[str, Any]] = {}
    facts: dict[str, Any] = {}
    for (package, combo), cells in cov.rows.items():
        packages[package][combo] = {}
        for s in cov.sms:
            entries = sorted(cells.get(s, []), key=lambda e: e.path)
            packages[package][combo][f"sm{s}"] = [e.path for e in entries]
            for e in entries:
                row = e.to_json()
                if "facts" in row:
                    facts.setdefault(e.sha256, row.pop("facts"))
                wheels[e.path] = row
    data: dict[str, Any] = {
        "schema": LS_SCHEMA,
        "repo": cov.location,
        "sms": [f"sm{s}" for s in cov.sms],
        "packages": dict(packages),
        "wheels": [wheels[p] for p in sorted(wheels)],
        "facts": facts,
    }
    if cov.serving:
        data["serving"] = cov.serving
    if cov.unindexed:  # a store with wheels and no index: what 'reindex --adopt' would read
        data["unindexed"] = cov.unindexed
    if cov.files is not None:
        data["files"] = {
            "count": cov.files,
            "guidance": FILE_GUIDANCE,
            "share": round(cov.files / FILE_GUIDANCE, 4),
            "warning": cov.files > WARN_SHARE * FILE_GUIDANCE,
        }
    return data


def store_files(index: Index) -> int:
    """Pure: the files a store holds for ``index``: each wheel path with its PEP 658 METADATA file and its
    variant (each file once), shard, page and the root index."""
    files = {p for e in index.entries for p in (e.path, e.metadata_path, e.variant_path) if p}
    return len(files) + len(catalogue_paths(index))


def serving(index: Index, line: MajorMinor) -> tuple[Index, dict[str, int]]:
    """Pure: the index less the wheels whose bytes do not run with torch ``line`` (a stable-ABI build from its
    floor on, a torch-free one always, an exact one on its own line), and how many serve it by each way."""
    from librarian.demands import (
        Binding,
        serves_line,
        torch_binding,
    )  # the judgement: only ls --torch loads it

    kinds = {"its own line": 0, "stable ABI": 0, "no torch": 0}
    gone = []
    for e in index.entries:
        wheel = wheel_of(e)
        why = serves_line(wheel, line)
        if why is None:
            gone.append(e.path)
        else:
            binding = torch_binding(wheel)
            stable, free = binding is Binding.STABLE, binding is Binding.NONE
            kinds[
                "its own line"
                if not why
                else "stable ABI"
                if stable
                else "no torch"
                if free
                else "its own line"
            ] += 1
    return index.with_entries(removed=gone), kinds


def _unindexed_wheels(store: Store, layout: Layout, packages: Sequence[str] | None) -> int:
    """The wheel files in the tree of a store with no index (of ``packages``, by their layout paths)."""
    count = 0
    for f in store.list_files().files:
        if not is_wheel(f.path):
            continue
        parsed = layout.parse_path(f.path)
        count += packages is None or (parsed is not None and parsed[0].package in packages)
    return count


def ls(
    store: Store, default_layout: Layout, packages: Sequence[str] = (), torch: MajorMinor | None = None
) -> Coverage:
    """The coverage of ``packages`` (all when empty); with ``torch``, of the wheels that serve that line."""
    keys = [package_key(p) for p in packages] or None
    index = read_index(store, default_layout, keys)
    # Only an empty index can be a missing one: a store with entries is not asked for its root again.
    unheld = not index.entries and not index.bad and store.read_file(ROOT) is None
    unindexed = _unindexed_wheels(store, default_layout, keys) if unheld else 0
    held = set(index.packages())  # entries and bad entries alike: one whose entries fail checks is held
    if keys is not None and (absent := [p for p, k in zip(packages, keys, strict=True) if k not in held]):
        if unindexed:
            hint = adopt_hint(store.location, unindexed)
            raise NotFound(f"{', '.join(absent)}: {store.location} has no index: {hint}")
        raise NotFound(f"{', '.join(absent)}: not in {store.location} ('librarian ls' lists what it holds)")
    if torch is not None:
        index, kinds = serving(index, torch)
        said = ", ".join(f"{n} by {k}" for k, n in kinds.items() if n)
        note = f"{sum(kinds.values())} stored wheel(s) run with torch {format_version(torch)}" + (
            f" ({said}): cells show the line each was filed for" if said else ""
        )
        return replace(coverage(index, store.location), serving=note)
    cov = replace(coverage(index, store.location), unindexed=unindexed)
    if keys is not None:
        return cov  # only some shards were read: the whole store's count is unknown
    files = store_files(index)
    if files > WARN_SHARE * FILE_GUIDANCE:
        log.warning(
            "%s: %d files, %.0f%% of the Hub's guidance of %d files per repo; 'gc' frees some",
            store.location,
            files,
            100 * files / FILE_GUIDANCE,
            FILE_GUIDANCE,
        )
    return replace(cov, files=files)
