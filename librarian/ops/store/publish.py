"""publish: label, check and file wheels into a store, in one atomic change with the index.

Preparing (reading, verifying RECORD, retagging, inspecting: ``ops/prepare.py``) happens once, before
the store is touched; planning is pure and runs against the store's current index, so the Hub store can re-plan on conflict.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from librarian.coords import Cell
from librarian.errors import BadInput, Refused, StoreError
from librarian.index import Index, IndexEntry, VariantRef, metadata_path, utc_stamp
from librarian.manifest import Manifest, metadata_text, render_manifest
from librarian.ops.store.prepare import PreparedWheel, PublishOptions, Taken, prepare
from librarian.ops.store.variant_wheels import MadeVariant, make_variant, torch_lines
from librarian.pending import pending_path, render_pending
from librarian.safeio import atomic_write, input_problem
from librarian.stores.base import Applied, Blob, Changes, Stages, Store, Upload, UploadStorage, read_index
from librarian.stores.location import StoreLocation
from librarian.variant_format import variant_wheel_path
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
    skipped: tuple[str, ...] = ()  # --skip-refused: each refused wheel and why

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
                {
                    "path": f.path,
                    "action": f.action,
                    "source": f.wheel.origin or str(f.wheel.source),
                    "sha256": f.wheel.sha256,
                }
                for f in self.filings
            ],
            "skipped": list(self.skipped),
            "variants": sorted(
                {p for e in self.changes.index.entries if (p := e.variant_path) in self.uploaded}
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
        lines += [f"{'skipped':>13}  {why}" for why in self.skipped]
        variants = list(
            dict.fromkeys(
                e.variant_path for e in self.changes.index.entries if e.variant_path in self.uploaded
            )
        )
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


VariantOf = Callable[[PreparedWheel], "MadeVariant | str"]


def _variant_for(
    wheel: PreparedWheel,
    probe: IndexEntry,
    variant_of: VariantOf,
    filed: Mapping[str, VariantRef],
    entries: Sequence[IndexEntry],
) -> VariantRef | None:
    """The variant ``probe`` (one cell of ``wheel``) records: its build's, unless it cannot join the store
    (another variant under its name, or its label meaning other properties in the release): said once."""
    made = variant_of(wheel)
    if isinstance(made, str):
        return None
    path = variant_wheel_path(probe.cell.package, made.ref.filename)
    if (other := filed.get(path)) is not None and other != made.ref:
        log.warning("%s: no variant wheel: %s is filed with other bytes", wheel.source, path)
        return None
    if clash := label_clash(entries, replace(probe, variant=made.ref)):
        log.warning("%s: no variant wheel: %s", wheel.source, clash)
        return None
    return made.ref


def plan_publish(
    index: Index,
    wheels: Sequence[PreparedWheel],
    options: PublishOptions,
    variant_of: VariantOf | None = None,
) -> PublishPlan:
    """Pure but for ``variant_of``: where each wheel goes, what is skipped (same sha256) and what is refused
    (occupied path); with ``variant_of`` (each build's variant wheel, made once, or why it has none), the
    variant each new entry records, decided against this very index: one upload per build not yet filed,
    and the variants no entry names any more (a replaced build's) deleted."""
    layout = index.layout
    existing = index.by_path()
    filings: list[Filing] = []
    entries: list[IndexEntry] = []
    uploads: dict[str, Upload] = {}
    seen: dict[str, PreparedWheel] = {}
    filed = {p: e.variant for e in index.entries if e.variant and (p := e.variant_path)}
    stored = frozenset(filed)  # variant wheels the store holds already: not uploaded again
    for wheel in wheels:
        label = wheel.name.label
        assert label is not None  # prepare() labelled it
        for sm in wheel.sms:
            cell = Cell(wheel.name.package, sm, label)
            path = layout.path_for(cell, str(wheel.name))
            if path in seen and seen[path].sha256 != wheel.sha256:
                raise BadInput(f"{wheel.source}: same path as {seen[path].source} ({path}) with other bytes")
            if path in seen:
                continue  # the same wheel given twice: filed once
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
            entry = _entry(path, cell, wheel, options.now)
            if variant_of is not None:
                ref = _variant_for(wheel, entry, variant_of, filed, [*index.entries, *entries])
                entry = replace(entry, variant=ref)
                if ref is not None and (where := entry.variant_path):
                    filed.setdefault(where, ref)
            entries.append(entry)
            uploads.update(_uploads(path, wheel, entry, variant_of, uploads.keys() | stored))
    count = len(entries)
    names = sorted({f.wheel.name.package for f in filings if f.action != "skip"})
    message = f"librarian publish: {count} wheel{'s' if count != 1 else ''} ({', '.join(names)})"
    new_index = index.with_entries(added=entries)
    named = {p for e in new_index.entries if (p := e.variant_path)}
    orphaned = tuple(
        sorted({p for e in index.entries if (p := e.variant_path) and p not in named and e.path in seen})
    )
    changes = Changes(new_index, tuple(uploads.values()), orphaned, message)
    return PublishPlan(tuple(filings), changes)


def _entry(path: str, cell: Cell, wheel: PreparedWheel, now: str) -> IndexEntry:
    """The index entry a prepared wheel gets at ``path``."""
    return IndexEntry(path, wheel.sha256, wheel.size, cell, now, wheel.facts, wheel.requires_python,
                      wheel.metadata_sha256 or None, wheel.overrides, requires_torch=wheel.requires_torch,
                      build=wheel.build)  # fmt: skip


def _uploads(
    path: str, wheel: PreparedWheel, entry: IndexEntry, variant_of: VariantOf | None, held: Collection[str]
) -> dict[str, Upload]:
    """What filing ``wheel`` at ``path`` uploads: the wheel, its variant wheel where one was made and is not
    ``held`` (uploaded already, or stored), its METADATA (PEP 658)."""
    uploads = {path: Upload(path, wheel.staged, wheel.sha256, wheel.size)}
    made = variant_of(wheel) if variant_of is not None and entry.variant is not None else None
    where = entry.variant_path
    if isinstance(made, MadeVariant) and where and where not in held:
        uploads[where] = Upload(where, made.staged, made.ref.sha256, made.ref.size)
    if wheel.metadata is not None:
        size = wheel.metadata.stat().st_size if wheel.metadata_size is None else wheel.metadata_size
        mpath = metadata_path(path)
        uploads[mpath] = Upload(mpath, wheel.metadata, wheel.metadata_sha256, size)
    return uploads


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
    now = utc_stamp()
    # a local store by its absolute path: the merge may run from another folder
    where = StoreLocation.parse(store.location).recorded()
    staged = Manifest(where, store.revision, head or None, now, entries, metadata)
    atomic_write(manifest, render_manifest(staged))
    log.info("staged %d wheel file(s) in %s; manifest %s", len(entries), store.location, manifest)
    return staged


def _variant_maker(out_dir: Path) -> VariantOf:
    """Each build's variant wheel, made the first time a plan asks for it (a re-planned attempt, or the
    build's other cells, reuse it), or why it has none (said once)."""
    lines = torch_lines()
    made: dict[str, MadeVariant | str] = {}

    def variant_of(wheel: PreparedWheel) -> MadeVariant | str:
        if wheel.sha256 not in made:
            result = make_variant(
                wheel.staged,
                wheel.name,
                wheel.facts,
                wheel.name.package,
                wheel.requires_python,
                out_dir,
                lines,
            )
            if isinstance(result, str):
                log.warning("%s: no variant wheel: %s", wheel.source, result)
            made[wheel.sha256] = result
        return made[wheel.sha256]

    return variant_of


def publish(
    store: Store,
    paths: Sequence[Path],
    options: PublishOptions,
    *,
    dry_run: bool = False,
    stage: bool = False,
    manifest: Path | None = None,
    taken: Taken | None = None,
) -> PublishPlan:
    """Publish ``paths`` into ``store`` (or only plan it, with ``dry_run``; or stage it for ``reindex``).

    With ``manifest`` (and ``stage``), staging makes no commit: the bytes go to the store and the
    entries to the manifest file, for ``reindex --manifest``. ``taken``: of wheels taken from elsewhere,
    the line each one's origin claims and where it came from.
    """
    # A FIFO would block the read: refused by what it is, as a folder or a missing file is; with
    # --skip-refused each is one skipped input, and the rest of the batch is filed.
    unusable = [BadInput(f"{path}: {problem}") for path in paths if (problem := input_problem(path))]
    if unusable and not options.skip_refused:
        raise unusable[0]
    paths = [p for p in paths if not input_problem(p)]
    assert options.layout is not None
    with tempfile.TemporaryDirectory(prefix="librarian-publish-") as tmp:
        wheels, refused = prepare(paths, options, Path(tmp), write=not dry_run, taken=taken)
        plan = file_prepared(
            store, wheels, options, Path(tmp), dry_run=dry_run, stage=stage, manifest=manifest
        )
        return replace(plan, skipped=tuple(str(e) for e in (*unusable, *refused)))


def file_prepared(
    store: Store,
    wheels: Sequence[PreparedWheel],
    options: PublishOptions,
    scratch: Path,
    *,
    dry_run: bool = False,
    stage: bool = False,
    manifest: Path | None = None,
    settles: Sequence[str] = (),
) -> PublishPlan:
    """File wheels :func:`prepare` made (their labelled copies in ``scratch``, which variants go to too):
    one change to ``store``, a stage, or a manifest; only the plan with ``dry_run``. ``settles``: files the
    change removes where the store holds them (the failure record of a build that now succeeded)."""
    layout = options.layout
    assert layout is not None
    variant_of = _variant_maker(scratch / "variants") if options.variants and not dry_run else None
    if dry_run or stage:
        # Staging plans against the index as read, without a lock or parent: its commit adds files
        # only, and reindex settles what landed (same path, other bytes) against the tree.
        index = read_index(store, layout, {w.name.package for w in wheels})
        plan = plan_publish(index, wheels, options, variant_of)
        if stage and not dry_run and manifest is not None:
            stage_to_manifest(store, plan, manifest)
            return plan
        if stage and not dry_run:
            commit = stage_plan(store, plan)
            log.info("staged in %s", commit or store.location)
            return replace(plan, commit=commit)
        return plan

    def planner(index: Index) -> tuple[Changes, PublishPlan]:
        plan = plan_publish(index, wheels, options, variant_of)
        held = tuple(path for path in settles if store.read_file(path) is not None)
        if held and not plan.changes.empty:
            plan = replace(plan, changes=replace(plan.changes, deletes=(*plan.changes.deletes, *held)))
        return plan.changes, plan

    applied: Applied[PublishPlan] = store.update(planner, layout)
    log.info("published to %s (%d attempt(s))", applied.where, applied.attempts)
    return replace(applied.result, commit=applied.commit)
