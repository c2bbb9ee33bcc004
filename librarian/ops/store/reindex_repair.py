"""What reindex puts back in the tree: the files the index promises and the tree lacks or holds other bytes
for (PEP 658 METADATA files, variant wheels), each made again from its wheel, and the variants an entry
records that are not its own, dropped.

Planning helpers of :mod:`librarian.ops.store.reindex`; each works in the temp folder of one reindex run.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from librarian.errors import LibrarianError
from librarian.index import Index, IndexEntry
from librarian.ops.store.variant_checks import unfaithful_variants
from librarian.ops.store.variant_wheels import MadeVariant, make_variant, torch_lines
from librarian.stores.base import Changes, Store, StoredFile, Upload
from librarian.variants import foreign_variants, label_clash
from librarian.wheel import OpenedWheel

log = logging.getLogger(__name__)


def missing_metadata(index: Index, files: Iterable[StoredFile]) -> list[IndexEntry]:
    """Pure: the entries whose wheel is in the tree and whose PEP 658 file, named by the index, is not."""
    paths = {f.path for f in files}
    return [e for e in index.entries if e.metadata_path and e.path in paths and e.metadata_path not in paths]


def restore_metadata(store: Store, index: Index, files: Sequence[StoredFile], tmp: Path) -> list[Upload]:
    """The METADATA files the index names and the tree lacks (removed by hand: a local store finishing a
    killed change drops the promise instead), re-read from their wheels into ``tmp``.

    A wheel whose METADATA no longer has the recorded sha256 is left alone: verify names that wheel.
    A file already in ``tmp`` (an earlier plan of this run: the Hub re-plans on a conflict) is not read again.
    """
    uploads = []
    for entry in missing_metadata(index, files):
        path = entry.metadata_path
        assert path is not None and entry.metadata_sha256 is not None  # missing_metadata: entries naming one
        source = tmp / f"{entry.metadata_sha256}.metadata"
        if source.is_file():
            uploads.append(Upload(path, source, entry.metadata_sha256, source.stat().st_size))
            continue
        try:
            with store.open(entry.path) as wheel:
                data = OpenedWheel.wheel(Path(wheel.name), entry.name).info().metadata
        except LibrarianError as e:
            log.warning("%s: cannot restore its METADATA file (%s)", entry.path, e)
            continue
        if hashlib.sha256(data).hexdigest() != entry.metadata_sha256:
            continue
        source.write_bytes(data)
        uploads.append(Upload(path, source, entry.metadata_sha256, len(data)))
    return uploads


def drop_foreign_variants(changes: Changes) -> tuple[Changes, frozenset[str]]:
    """The change without the variants its entries record that are not their own (a bent index, a staged
    manifest carrying one): the named path may be another wheel's. Each is said; its own is made again."""
    foreign = foreign_variants(changes.index.entries)
    if not foreign:
        return changes, frozenset()
    by_path = changes.index.by_path()
    for path, why in sorted(foreign.items()):
        log.warning("%s: %s; dropped from the index, and its own made in its place", path, why)
    index = changes.index.with_entries(added=[replace(by_path[p], variant=None) for p in foreign])
    return replace(changes, index=index), frozenset(foreign)


def variant_changes(
    store: Store, changes: Changes, files: Sequence[StoredFile], tmp: Path, every: bool, dry_run: bool,
    deep: bool,
) -> tuple[Changes, list[Upload], list[IndexEntry]]:  # fmt: skip
    """``changes`` with the variant wheels to make (:func:`make_variants`), those made, and (``dry_run``:
    nothing is made) those that would be; ``deep``: also those not their source's, each wheel read."""
    changes, bent = drop_foreign_variants(changes)
    unfaithful = unfaithful_variants(store, changes.index, files) if deep else frozenset()
    if dry_run:
        return changes, [], variants_wanted(changes.index, files, every, bent, unfaithful)
    index, made = make_variants(store, changes.index, files, tmp, every, bent, unfaithful)
    return replace(changes, index=index), made, []


def variants_wanted(
    index: Index, files: Sequence[StoredFile], every: bool, bent: frozenset[str] = frozenset(),
    unfaithful: frozenset[str] = frozenset(),
) -> list[IndexEntry]:  # fmt: skip
    """The entries whose variant wheel is to be made: recorded and missing or not the bytes recorded (its
    size, or its sha256 where the listing has it, differs), not its source's variant (``unfaithful``),
    dropped as not its own (``bent``), or (``every``) never made."""
    listed = {f.path: f for f in files}

    def stale(e: IndexEntry) -> bool:
        if e.variant is None or e.variant_path is None:
            return False
        found = listed.get(e.variant_path)
        if found is None or e.path in unfaithful:
            return True
        return found.size != e.variant.size or (found.sha256 is not None and found.sha256 != e.variant.sha256)

    return [
        e
        for e in index.entries
        if e.path in listed and ((e.variant is None and (every or e.path in bent)) or stale(e))
    ]


def make_variants(
    store: Store, index: Index, files: Sequence[StoredFile], tmp: Path, every: bool,
    bent: frozenset[str] = frozenset(), unfaithful: frozenset[str] = frozenset(),
) -> tuple[Index, list[Upload]]:  # fmt: skip
    """Variant wheels to upload: those the index records and the tree lacks or holds other bytes for (made
    again from their source), those dropped as not their entry's own, and with ``every`` one for each wheel
    that has none."""
    wanted = variants_wanted(index, files, every, bent, unfaithful)
    if not wanted:
        return index, []
    lines = torch_lines()
    uploads: dict[str, Upload] = {}
    updated: list[IndexEntry] = []
    made_for: dict[str, MadeVariant | str] = {}  # by the source's sha256: one variant per build
    for entry in wanted:
        if entry.sha256 not in made_for:
            try:
                with store.open(entry.path) as wheel:
                    made_for[entry.sha256] = make_variant(
                        Path(wheel.name),
                        entry.name,
                        entry.facts,
                        entry.cell.package,
                        entry.requires_python,
                        tmp / "variants",
                        lines,
                        entry.cell.label,
                    )
            except LibrarianError as e:
                made_for[entry.sha256] = f"cannot make its variant wheel ({e})"
            if isinstance(made := made_for[entry.sha256], str):
                log.warning("%s: no variant wheel: %s", entry.path, made)
        made = made_for[entry.sha256]
        if isinstance(made, str):
            continue
        if clash := label_clash([*index.entries, *updated], replace(entry, variant=made.ref)):
            log.warning("%s: no variant wheel: %s", entry.path, clash)
            continue
        entry = replace(entry, variant=made.ref)
        updated.append(entry)
        where = entry.variant_path
        assert where is not None
        uploads.setdefault(where, Upload(where, made.staged, made.ref.sha256, made.ref.size))
    return index.with_entries(added=updated), list(uploads.values())
