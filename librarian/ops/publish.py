"""publish: label, check and file wheels into a store, in one atomic change with the index.

Preparing (reading, verifying RECORD, retagging, inspecting: ``ops/prepare.py``) happens once, before
the store is touched; planning is pure and runs against the store's current index, so the Hub store can re-plan on conflict.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from librarian.coords import Cell
from librarian.errors import BadInput, Refused, StoreError
from librarian.index import Index, IndexEntry, metadata_path
from librarian.manifest import Manifest, metadata_text, render_manifest
from librarian.ops.prepare import PreparedWheel, PublishOptions, prepare
from librarian.ops.variant_wheels import MadeVariant, make_variant, torch_lines
from librarian.pending import pending_path, render_pending
from librarian.safeio import atomic_write, input_problem
from librarian.stores.base import Applied, Blob, Changes, Stages, Store, Upload, UploadStorage, read_index
from librarian.variants import label_clash

# PublishOptions is read here by users of librarian as a library (``librarian.PublishOptions``).
__all__ = [
    "Filing",
    "PublishOptions",
    "PublishPlan",
    "file_prepared",
    "plan_publish",
    "publish",
    "stage_plan",
    "stage_to_manifest",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Filing:
    """One (wheel, path) pair of the plan and what happens to it."""

    path: str
    wheel: PreparedWheel
    action: str  # "add", "replace", "skip"


@dataclass(frozen=True, slots=True)
class PublishPlan:
    """What publish does: the filings and the change to the store."""

    filings: tuple[Filing, ...]
    changes: Changes
    commit: str = ""  # the commit's web URL, where the store makes commits (the Hub)

    @property
    def added(self) -> tuple[Filing, ...]:
        """Filings that write a file."""
        return tuple(f for f in self.filings if f.action != "skip")

    def to_json(self, location: str, *, dry_run: bool, stage: bool, manifest: Path | None) -> dict[str, Any]:
        """The plan (or what was done) for ``--json``."""
        return {
            "schema": 1,
            "repo": location,
            "dry_run": dry_run,
            "staged": stage,
            "commit": self.commit or None,
            "manifest": str(manifest) if manifest is not None and not dry_run else None,
            "filings": [
                {"path": f.path, "action": f.action, "source": str(f.wheel.source), "sha256": f.wheel.sha256}
                for f in self.filings
            ],
            "variants": sorted(
                p for e in self.changes.index.entries if (p := e.variant_path) in self.uploaded
            ),
        }

    @property
    def uploaded(self) -> frozenset[str]:
        """The store paths this change writes."""
        return frozenset(u.path for u in self.changes.uploads)

    def render(self, location: str, *, dry_run: bool, stage: bool, manifest: Path | None) -> str:
        """One line per path (added, replaced, unchanged), then what was written where, and the commit."""
        verb = {
            "add": "would add" if dry_run else "added",
            "replace": "would replace" if dry_run else "replaced",
            "skip": "unchanged",
        }
        lines = [f"{verb[f.action]:>13}  {f.path}" for f in self.filings]
        variants = [e.variant_path for e in self.changes.index.entries if e.variant_path in self.uploaded]
        lines += [f"{'with variant':>13}  {v}" for v in variants]
        done = "would be written" if dry_run else "written"
        if stage:
            done = "would be staged" if dry_run else "staged (awaiting 'librarian reindex')"
        if stage and manifest is not None and not dry_run:
            done = f"staged, no commit (manifest {manifest}; 'librarian reindex --manifest' indexes them)"
        lines.append(
            f"{len(self.added)} file(s) {done} to {location}"
            + (f", with {len(variants)} variant wheel(s) (for uv)" if variants else "")
            + (" (dry run: nothing changed)" if dry_run else "")
        )
        if self.commit:
            lines.append(f"commit {self.commit}")
        return "\n".join(lines)


def plan_publish(
    index: Index,
    wheels: Sequence[PreparedWheel],
    options: PublishOptions,
    variants: Mapping[tuple[str, str], MadeVariant | str] | None = None,
) -> PublishPlan:
    """Pure: where each wheel goes, what is skipped (same sha256) and what is refused (occupied path).

    ``variants``: each wheel's variant wheel by (sha256, sm), made beforehand (or why it has none)."""
    layout = index.layout
    existing = index.by_path()
    filings: list[Filing] = []
    entries: list[IndexEntry] = []
    uploads: list[Upload] = []
    seen: dict[str, PreparedWheel] = {}
    for wheel in wheels:
        label = wheel.name.label
        assert label is not None  # prepare() labelled it
        for sm in wheel.sms:
            cell = Cell(wheel.name.package, sm, label)
            path = layout.path_for(cell, str(wheel.name))
            if path in seen and seen[path].sha256 != wheel.sha256:
                raise BadInput(f"{wheel.source}: same path as {seen[path].source} ({path}) with other bytes")
            seen[path] = wheel
            old = existing.get(path)
            if old is not None and old.sha256 == wheel.sha256:
                filings.append(Filing(path, wheel, "skip"))
                continue
            if old is not None and not options.replace:
                raise Refused(
                    f"{path}: already stored with other bytes (sha256 {old.sha256[:12]}…); pass --replace"
                )
            filings.append(Filing(path, wheel, "replace" if old else "add"))
            made = (variants or {}).get((wheel.sha256, sm.sm))
            ref = made.ref if isinstance(made, MadeVariant) else None
            if ref is not None:
                probe = IndexEntry(path, wheel.sha256, wheel.size, cell, variant=ref)
                if clash := label_clash([*index.entries, *entries], probe):
                    log.warning("%s: no variant wheel for sm%s: %s", wheel.source, sm.sm, clash)
                    made = ref = None
            entries.append(
                IndexEntry(
                    path,
                    wheel.sha256,
                    wheel.size,
                    cell,
                    options.now,
                    wheel.facts,
                    wheel.requires_python,
                    wheel.metadata_sha256 or None,
                    wheel.overrides,
                    ref,
                )
            )
            uploads.append(Upload(path, wheel.staged, wheel.sha256, wheel.size))
            if isinstance(made, MadeVariant):
                where = f"{path.rpartition('/')[0]}/{made.ref.filename}"
                uploads.append(Upload(where, made.staged, made.ref.sha256, made.ref.size))
            if wheel.metadata is not None:
                size = wheel.metadata.stat().st_size if wheel.metadata_size is None else wheel.metadata_size
                uploads.append(Upload(metadata_path(path), wheel.metadata, wheel.metadata_sha256, size))
    count = len(entries)
    names = sorted({f.wheel.name.package for f in filings if f.action != "skip"})
    message = f"librarian publish: {count} wheel{'s' if count != 1 else ''} ({', '.join(names)})"
    changes = Changes(index.with_entries(added=entries), tuple(uploads), (), message)
    return PublishPlan(tuple(filings), changes)


def _stager(store: Store, flag: str) -> Stages:
    if not isinstance(store, Stages):
        raise BadInput(f"{store.location}: a {store.kind} store cannot stage wheels; publish without {flag}")
    return store


def stage_plan(store: Store, plan: PublishPlan) -> str:
    """Fan-in: store the plan's wheels and one pending entry each, leaving the index to ``reindex``.
    Returns the URL of the commit made, or ``""`` (nothing to stage, or a store that makes no commits)."""
    stager = _stager(store, "--stage")
    by_path = plan.changes.index.by_path()
    entries = [by_path[f.path] for f in plan.added]
    if not entries:
        return ""
    files = {pending_path(e): render_pending(e) for e in entries}
    message = plan.changes.message.replace("librarian publish:", "librarian publish --stage:", 1)
    return stager.stage(plan.changes.uploads, files, message)


def _stage_bytes(store: Store, wheels: Sequence[Upload]) -> str:
    """The wheels' bytes put where ``reindex --manifest`` will find them, without changing the index:
    upload storage where the store has it (the Hub's LFS objects: no commit), else the tree itself (a
    directory writes the files at their paths). Returns the head planned against, or ``""``."""
    blobs = [Blob(u.sha256, u.size, u.path) for u in {u.sha256: u for u in wheels if u.source}.values()]
    if isinstance(store, UploadStorage):
        head = store.stage_blobs(wheels)
        if missing := store.missing_blobs(blobs):
            raise StoreError(
                f"{store.location}/{missing[0].name}: the store did not keep it as an uploaded object "
                "(the Hub stores small files inline); publish it without --manifest"
            )
        return head
    _stager(store, "--stage --manifest").stage(wheels, {}, "librarian publish --stage --manifest")
    return ""


def stage_to_manifest(store: Store, plan: PublishPlan, manifest: Path) -> Manifest:
    """Put the plan's wheels' bytes in the store (no commit, no index change) and write ``manifest``."""
    by_path = plan.changes.index.by_path()
    entries = tuple(by_path[f.path] for f in plan.added)
    # PEP 658 METADATA files are too small for the Hub to keep as pre-uploaded LFS objects: they travel in
    # the manifest and reindex commits them beside their wheels.
    wheels = tuple(u for u in plan.changes.uploads if not u.path.endswith(".metadata"))
    metadata = {
        f.wheel.metadata_sha256: metadata_text(f.wheel.metadata.read_bytes())
        for f in plan.added
        if f.wheel.metadata is not None
    }
    head = _stage_bytes(store, wheels) if entries else ""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    staged = Manifest(store.location, store.revision, head or None, now, entries, metadata)
    atomic_write(manifest, render_manifest(staged))
    log.info("staged %d wheel file(s) in %s; manifest %s", len(entries), store.location, manifest)
    return staged


def make_variants(
    wheels: Sequence[PreparedWheel], out_dir: Path, filed: Index | None = None
) -> dict[tuple[str, str], MadeVariant | str]:
    """Each wheel's variant wheel for each cell it is filed in, by (sha256, sm), or why it has none (said once).

    ``filed``: the store's index as read; a cell that already holds these very bytes is left as it is (the
    plan skips it), so no copy of the wheel is written for it."""
    lines = torch_lines()
    held = {(e.path, e.sha256) for e in filed.entries} if filed is not None else set()
    made: dict[tuple[str, str], MadeVariant | str] = {}
    for wheel in wheels:
        label = wheel.name.label
        assert label is not None  # prepare() labelled it
        for sm in wheel.sms:
            cell = Cell(wheel.name.package, sm, label)
            if filed is not None and (filed.layout.path_for(cell, str(wheel.name)), wheel.sha256) in held:
                continue
            result = make_variant(
                wheel.staged, wheel.name, wheel.facts, cell, wheel.requires_python, out_dir, lines
            )
            if isinstance(result, str):
                log.warning("%s: no variant wheel for sm%s: %s", wheel.source, sm.sm, result)
            made[(wheel.sha256, sm.sm)] = result
    return made


def publish(
    store: Store,
    paths: Sequence[Path],
    options: PublishOptions,
    *,
    dry_run: bool = False,
    stage: bool = False,
    manifest: Path | None = None,
) -> PublishPlan:
    """Publish ``paths`` into ``store`` (or only plan it, with ``dry_run``; or stage it for ``reindex``).

    With ``manifest`` (and ``stage``), staging makes no commit: the bytes go to the store and the
    entries to the manifest file, for ``reindex --manifest``.
    """
    for path in paths:
        if problem := input_problem(path):  # a FIFO would block the read: refused by what it is
            raise BadInput(f"{path}: {problem}")
    assert options.layout is not None
    with tempfile.TemporaryDirectory(prefix="librarian-publish-") as tmp:
        wheels = prepare(paths, options, Path(tmp), write=not dry_run)
        return file_prepared(
            store, wheels, options, Path(tmp), dry_run=dry_run, stage=stage, manifest=manifest
        )


def file_prepared(
    store: Store,
    wheels: Sequence[PreparedWheel],
    options: PublishOptions,
    scratch: Path,
    *,
    dry_run: bool = False,
    stage: bool = False,
    manifest: Path | None = None,
) -> PublishPlan:
    """File wheels :func:`prepare` made (their labelled copies in ``scratch``, which variants go to too):
    one change to ``store``, a stage, or a manifest; only the plan with ``dry_run``."""
    layout = options.layout
    assert layout is not None
    variants: dict[tuple[str, str], MadeVariant | str] = {}
    if options.variants and not dry_run:
        filed = read_index(store, layout, {w.name.package for w in wheels})
        variants = make_variants(wheels, scratch / "variants", filed)
    if dry_run or stage:
        # Staging plans against the index as read, without a lock or parent: its commit adds files
        # only, and reindex settles what landed (same path, other bytes) against the tree.
        index = read_index(store, layout, {w.name.package for w in wheels})
        plan = plan_publish(index, wheels, options, variants)
        if stage and not dry_run and manifest is not None:
            stage_to_manifest(store, plan, manifest)
            return plan
        if stage and not dry_run:
            commit = stage_plan(store, plan)
            log.info("staged in %s", commit or store.location)
            return replace(plan, commit=commit)
        return plan

    def planner(index: Index) -> tuple[Changes, PublishPlan]:
        plan = plan_publish(index, wheels, options, variants)
        return plan.changes, plan

    applied: Applied[PublishPlan] = store.update(planner, layout)
    log.info("published to %s (%d attempt(s))", applied.where, applied.attempts)
    return replace(applied.result, commit=applied.commit)
