"""publish: label, check and file wheels into a store, in one atomic change with the index.

Preparing (reading, verifying RECORD, retagging, inspecting) happens once, before the store is touched;
planning is pure and runs against the store's current index, so the Hub store can re-plan on conflict.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from librarian.coords import Cell, GpuArch, Label, WheelName
from librarian.errors import BadInput, Refused
from librarian.facts import WheelFacts, facts_to_json
from librarian.index import Index, IndexEntry, pending_path, render_pending
from librarian.inspection import claim_mismatches, inspect_wheel
from librarian.layout import Layout
from librarian.matrix import Matrix, load_matrix
from librarian.ops.labels import choose_label
from librarian.stores.base import Applied, Changes, Store, Upload, read_index
from librarian.wheelfile import check_publishable, retag, sha256_file, verify_record

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreparedWheel:
    """A wheel ready to file: labelled, verified, hashed, with the cells it goes to."""

    source: Path  # the file given
    staged: Path  # the labelled file to upload (== source when it was already labelled)
    name: WheelName
    sha256: str
    size: int
    sms: tuple[GpuArch, ...]
    facts: WheelFacts | None = None


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

    @property
    def added(self) -> tuple[Filing, ...]:
        """Filings that write a file."""
        return tuple(f for f in self.filings if f.action != "skip")


@dataclass(frozen=True, slots=True)
class PublishOptions:
    """Every publish flag, parsed."""

    label: Label | None = None
    sms: tuple[GpuArch, ...] = ()
    replace: bool = False
    force: bool = False
    allow_unknown_combo: bool = False
    layout: Layout | None = None
    now: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def serves(facts: WheelFacts, sm: GpuArch) -> bool:
    """Whether every device-code member has SASS that runs on a GPU ``sm`` (DESIGN.md's rules)."""
    from librarian.verdict import runs_on

    def fits(arch: GpuArch) -> bool:
        # A cell for arch-specific code (sm90a) takes only that code; a plain cell, any SASS that runs there.
        return arch == sm if sm.suffix else runs_on(arch, sm.capability)

    members = facts.device_binaries
    return bool(members) and all(any(fits(a) for a in b.sass) for b in members)


def sass_text(facts: WheelFacts) -> str:
    """The SASS a wheel carries, per device-code member when it has several: for refusals and findings."""
    members = facts.device_binaries
    if len(members) == 1:
        return ", ".join(str(a) for a in members[0].sass) or "no SASS"
    return "; ".join(f"{b.path}: {' '.join(str(a) for a in b.sass) or 'no SASS'}" for b in members)


def cells_from_binaries(
    facts: WheelFacts | None, requested: Sequence[GpuArch], force: bool, label: str
) -> tuple[GpuArch, ...]:
    """The GPUs a wheel is filed for: ``--sm`` (checked against the binaries), else each SASS arch it serves."""
    if requested:
        if facts is not None and facts.device_binaries and not force:
            unserved = [sm for sm in requested if not serves(facts, sm)]
            if unserved:
                bad = ", ".join(f"sm{a.sm}" for a in unserved)
                raise Refused(f"{label}: its binaries do not serve {bad} (they have {sass_text(facts)}); "
                              "pass --force to file it anyway")  # fmt: skip
        return tuple(sorted(set(requested)))
    if facts is None or not facts.device_binaries:
        raise BadInput(f"{label}: no GPU code found in its binaries; pass --sm to say which GPUs it is for")
    # Candidates are the SASS archs any member carries; a cell is kept when every member runs there, so
    # members with sm_80 and sm_86 serve sm86 (sm_80 SASS runs on 8.6) though they share no arch.
    candidates = sorted({a for b in facts.device_binaries for a in b.sass})
    cells = tuple(sm for sm in candidates if serves(facts, sm))
    if not cells:
        raise BadInput(f"{label}: no GPU runs all of its binaries by SASS ({sass_text(facts)}); pass --sm")
    return cells


def check_combo(label: Label, name: str, matrix: Matrix) -> None:
    """Refuse a (torch, CUDA) combo that PyTorch never shipped."""
    if not matrix.is_shipped(label):
        shipped = ", ".join(str(l) for l in matrix.labels_for_torch(label.torch)) or "none known"
        raise Refused(
            f"{name}: PyTorch never shipped {label}; for torch {label.torch[0]}.{label.torch[1]} it shipped "
            f"{shipped} (pass --allow-unknown-combo if you know better)"
        )


def prepare(paths: Sequence[Path], options: PublishOptions, staging: Path) -> list[PreparedWheel]:
    """Read, label, verify and inspect each wheel; labelled copies go to ``staging``."""
    prepared = []
    matrix = None if options.allow_unknown_combo else load_matrix()  # read once, not per wheel
    for path in paths:
        name = WheelName.parse(path.name)
        label = choose_label(name, options.label, force=options.force)
        if matrix is not None:
            check_combo(label, path.name, matrix)
        if name.label == label:
            verify_record(path)
            staged = path
        else:
            staged = retag(path, label, staging, force=True, verify=True)
        check_publishable(staged)  # verify's metadata checks, so publish stores nothing verify rejects
        facts = inspect_wheel(staged)
        if not options.force:
            lies = claim_mismatches(WheelName.parse(staged.name), facts)
            if lies:
                raise Refused(f"{path.name}: {lies[0]}; pass --force to publish it anyway")
        sms = cells_from_binaries(facts, options.sms, options.force, path.name)
        prepared.append(
            PreparedWheel(
                path,
                staged,
                WheelName.parse(staged.name),
                sha256_file(staged),
                staged.stat().st_size,
                sms,
                facts,
            )
        )
    return prepared


def plan_publish(index: Index, wheels: Sequence[PreparedWheel], options: PublishOptions) -> PublishPlan:
    """Pure: where each wheel goes, what is skipped (same sha256) and what is refused (occupied path)."""
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
            facts = facts_to_json(wheel.facts) if wheel.facts is not None else None
            entries.append(IndexEntry(path, wheel.sha256, wheel.size, cell, options.now, facts))
            uploads.append(Upload(path, wheel.staged, wheel.sha256, wheel.size))
    count = len(uploads)
    names = sorted({f.wheel.name.package for f in filings if f.action != "skip"})
    message = f"librarian publish: {count} wheel{'s' if count != 1 else ''} ({', '.join(names)})"
    changes = Changes(index.with_entries(added=entries), tuple(uploads), (), message)
    return PublishPlan(tuple(filings), changes)


def stage_plan(store: Store, plan: PublishPlan) -> str:
    """Fan-in: store the plan's wheels and one pending entry each, leaving the index to ``reindex``."""
    by_path = plan.changes.index.by_path()
    entries = [by_path[f.path] for f in plan.added]
    if not entries:
        return store.location
    files = {pending_path(e): render_pending(e) for e in entries}
    message = plan.changes.message.replace("librarian publish:", "librarian publish --stage:", 1)
    return store.stage(plan.changes.uploads, files, message)


def publish(
    store: Store, paths: Sequence[Path], options: PublishOptions, *, dry_run: bool = False, stage: bool = False
) -> PublishPlan:
    """Publish ``paths`` into ``store`` (or only plan it, with ``dry_run``; or stage it for ``reindex``)."""
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise BadInput(f"{missing[0]}: no such file")
    layout = options.layout
    assert layout is not None
    with tempfile.TemporaryDirectory(prefix="librarian-publish-") as tmp:
        wheels = prepare(paths, options, Path(tmp))
        if dry_run or stage:
            # Staging plans against the index as read, without a lock or parent: its commit adds files
            # only, and reindex settles what landed (same path, other bytes) against the tree.
            plan = plan_publish(read_index(store, layout, {w.name.package for w in wheels}), wheels, options)
            if stage and not dry_run:
                log.info("staged in %s", stage_plan(store, plan))
            return plan
        holder: list[PublishPlan] = []

        def planner(index: Index) -> Changes:
            holder.clear()
            holder.append(plan_publish(index, wheels, options))
            return holder[0].changes

        applied: Applied = store.update(planner, layout)
        log.info("published to %s (%d attempt(s))", applied.where, applied.attempts)
        return holder[0]
