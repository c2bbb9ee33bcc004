"""Fan-in without commits: ``publish --stage --manifest`` and ``reindex --manifest``.

The Hub's binding limit is commits (huggingface.co: 128 per hour per repo), not bytes. So each job of a
build matrix only uploads its wheels' bytes (huggingface_hub's LFS pre-upload: the blobs are on the Hub,
no commit is made) and writes a :class:`~librarian.manifest.Manifest`; CI hands the manifests to one
last job, whose ``reindex --manifest`` checks that every blob is there, merges the entries into the
index with publish's rules, and commits once (in pieces of wheels first, index last, when it is big).
On a local store staging writes the wheels at their paths, and reindex checks them there.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from librarian.errors import BadInput, Refused
from librarian.index import Index, IndexEntry, metadata_path
from librarian.layout import Layout
from librarian.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    merge_manifests,
    merge_metadata,
    metadata_bytes,
    parse_manifest,
)
from librarian.ops.store.placement import Problem, check_placement
from librarian.ops.store.publish_checks import check_combo
from librarian.ops.store.reindex_report import ReindexReport
from librarian.pytorch.matrix import load_matrix
from librarian.safeio import input_problem
from librarian.stores.base import Blob, Changes, Store, Upload, UploadStorage, missing_at_paths, read_index
from librarian.stores.location import StoreLocation

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ManifestOptions:
    """The rules ``reindex --manifest`` merges with (publish's)."""

    replace: bool = False
    allow_unknown_combo: bool = False


def expand_manifests(paths: Sequence[Path]) -> list[Path]:
    """The manifest files ``paths`` name: files as given, folders by their ``*.json`` (as CI downloads artifacts)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not found:
                raise BadInput(f"{path}: no manifest (*.json) in this folder")
            files += found
        else:
            files.append(path)
    return files


def same_store(a: str, b: str) -> bool:
    """Whether two store locations name one store: a local folder by its resolved path (``mf/base`` and its
    absolute path alike), anything else as written."""
    return StoreLocation.parse(a).same_as(StoreLocation.parse(b))


def staged_problem(layout: Layout, entry: IndexEntry) -> str | None:
    """Pure: why a staged entry cannot be merged as it is (verify's own checks of an entry against its path:
    the cell it records is the cell its path is filed under, the layout's and the filename's), or ``None``."""
    if problems := check_placement(layout, entry.path):
        return problems[0]
    parsed = layout.parse_path(entry.path)
    assert parsed is not None  # check_placement said it parses
    cell, _ = parsed
    if entry.cell != cell:
        return f"records cell {entry.cell.package} sm{entry.cell.sm.sm} {entry.cell.label}, but its path is {cell.package} sm{cell.sm.sm} {cell.label}"
    return None


def read_manifests(paths: Sequence[Path], store: Store) -> tuple[tuple[IndexEntry, ...], dict[str, str], int]:
    """Every entry of the manifests at ``paths`` (a folder: every ``*.json`` under it), each checked to be for
    ``store``; the METADATA texts they carry, by sha256; and how many manifests were read."""
    loaded: list[tuple[str, Manifest]] = []
    for path in expand_manifests(paths):
        if problem := input_problem(path):  # a FIFO would block the read: refused by what it is
            raise BadInput(f"{path}: {problem}")
        try:
            with open(path, "rb") as f:  # never more than the limit (plus one byte to know it is over)
                text = f.read(MAX_MANIFEST_BYTES + 1)
        except OSError as e:
            raise BadInput(f"{path}: cannot read the manifest ({e.strerror or e})") from e
        manifest = parse_manifest(text, str(path))
        if not same_store(manifest.repo, store.location):
            raise BadInput(f"{path}: staged for {manifest.repo}, not {store.location}")
        loaded.append((str(path), manifest))
    return merge_manifests(loaded), merge_metadata([m for _, m in loaded]), len(loaded)


def plan_manifests(
    index: Index,
    entries: Sequence[IndexEntry],
    options: ManifestOptions,
    metadata: Mapping[str, Path] | None = None,
) -> tuple[Changes, list[IndexEntry]]:
    """Pure: the change that files ``entries`` (their bytes staged) into ``index``; the entries it adds.

    Same bytes at the same path: skipped. Other bytes at an occupied path: refused unless ``replace``.
    ``metadata`` (sha256 -> a file of it) gives the PEP 658 files to commit beside the wheels; an entry
    whose METADATA is not there loses its ``metadata_sha256`` rather than name a file that is not stored.
    """
    for entry in entries:
        if (why := staged_problem(index.layout, entry)) is not None:
            raise BadInput(f"{entry.path}: staged entry {why}; nothing merged")
    files = metadata or {}
    entries = [
        e if e.metadata_sha256 in files or not e.metadata_sha256 else replace(e, metadata_sha256=None)
        for e in entries
    ]
    current = index.by_path()
    merged: list[IndexEntry] = []
    for entry in entries:
        old = current.get(entry.path)
        if old is not None and old.sha256 == entry.sha256:
            continue
        if old is not None and not options.replace:
            raise Refused(
                f"{entry.path}: already stored with other bytes (sha256 {old.sha256[:12]}…); pass --replace"
            )
        merged.append(entry)
    uploads = tuple(Upload(e.path, None, e.sha256, e.size) for e in merged)
    # A variant wheel was staged with its wheel (publish --variants --stage --manifest): committed beside it.
    uploads += tuple(  # one per build: its cells name one variant path
        {
            p: Upload(p, None, e.variant.sha256, e.variant.size)
            for e in merged
            if e.variant is not None and (p := e.variant_path) is not None
        }.values()
    )
    uploads += tuple(
        Upload(
            metadata_path(e.path),
            files[e.metadata_sha256],
            e.metadata_sha256,
            files[e.metadata_sha256].stat().st_size,
        )
        for e in merged
        if e.metadata_sha256
    )
    packages = sorted({e.cell.package for e in merged})
    message = f"librarian reindex --manifest: {len(merged)} staged wheel(s) ({', '.join(packages)})"
    return Changes(index.with_entries(added=merged), uploads, (), message), merged


def reindex_manifests(
    store: Store,
    default_layout: Layout,
    paths: Sequence[Path],
    options: ManifestOptions,
    *,
    dry_run: bool = False,
) -> ReindexReport:
    """Merge the wheels the manifests at ``paths`` staged into the index, in one change.

    A wheel whose bytes the store does not hold is dropped and reported (a finding); the rest land.
    """
    entries, texts, count = read_manifests(paths, store)
    if not options.allow_unknown_combo:
        matrix = load_matrix()
        warnings = {check_combo(entry.cell.label, entry.filename, matrix) for entry in entries}
        for warning in sorted(w for w in warnings if w):
            log.warning("%s", warning)
    blobs = [Blob(e.sha256, e.size, e.path) for e in entries]
    # Staged bytes wait in upload storage where the store has it (the Hub), else at their paths.
    missing = (
        store.missing_blobs(blobs) if isinstance(store, UploadStorage) else missing_at_paths(store, blobs)
    )
    gone = {(b.name, b.sha256) for b in missing}
    dropped = tuple(
        Problem(
            e.path,
            f"staged, but the store does not hold its bytes (sha256 {e.sha256[:12]}…, {e.size} bytes): stage it again",
        )
        for e in entries
        if (e.path, e.sha256) in gone
    )
    present = [e for e in entries if (e.path, e.sha256) not in gone]
    with tempfile.TemporaryDirectory(prefix="librarian-reindex-") as tmp:
        files = {}
        for sha, text in texts.items():
            files[sha] = Path(tmp) / f"{sha}.metadata"
            files[sha].write_bytes(metadata_bytes(text))

        def planner(index: Index) -> tuple[Changes, list[IndexEntry]]:
            return plan_manifests(index, present, options, files)

        report = ReindexReport(store.location, dropped=dropped, manifests=count)
        if dry_run:
            return _with(report, planner(read_index(store, default_layout))[1])
        applied = store.update(planner, default_layout)
    for note in applied.notes:
        log.info("%s", note)
    return _with(report, applied.result, applied.where, applied.commit)


def _with(
    report: ReindexReport, merged: list[IndexEntry], where: str = "", commit: str = ""
) -> ReindexReport:
    return replace(report, merged=tuple(merged), where=where, commit=commit)
