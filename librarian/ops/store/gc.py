"""gc: prune stale torch lines and superseded versions, in one change with the index.

The plan is pure (``plan_gc``) and lists every wheel it removes with its reason. It never removes the
last wheel of a (package, sm, python, platform) on a torch line it keeps, and a plan that would leave a
package with no wheel at all acts only with ``allow_empty``. Sizes count each stored blob once. On the
Hub a deleted file's LFS object stays in the history; ``purge`` deletes those the gc commit dropped and
nothing at the head still references.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from packaging.version import Version

from librarian.catalogue import catalogue_paths, wheel_of
from librarian.coords import MajorMinor, WheelName, format_version
from librarian.demands import serves_line
from librarian.errors import Refused, StoreError
from librarian.index import STAMP, Index, IndexEntry
from librarian.layout import Layout
from librarian.ops.store.gc_policy import GcPolicy
from librarian.ops.store.gc_report import GcReport, Removal
from librarian.stores.base import Applied, Blob, Changes, Store, UploadStorage, read_index
from librarian.variants import foreign_variants

log = logging.getLogger(__name__)


def _group(entry: IndexEntry, name: WheelName) -> tuple[str, str, MajorMinor, MajorMinor, str, str]:
    return (
        entry.cell.package,
        entry.cell.sm.sm,
        entry.cell.label.torch,
        entry.cell.label.cuda,
        name.python_tag,
        name.platform_tag,
    )


def _slot(entry: IndexEntry, name: WheelName) -> tuple[str, str, str, str]:
    """What a wheel is for, torch and CUDA lines aside: package, GPU, Python and platform."""
    return entry.cell.package, entry.cell.sm.sm, name.python_tag, name.platform_tag


def _added(entry: IndexEntry) -> datetime | None:
    try:
        return datetime.strptime(entry.added, STAMP).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def plan_gc(index: Index, policy: GcPolicy) -> list[Removal]:
    """Pure: every wheel the policy removes, with its reason, in path order."""
    return plan_gc_and_kept(index, policy)[0]


def plan_gc_and_kept(index: Index, policy: GcPolicy) -> tuple[list[Removal], list[tuple[str, str]]]:
    """Pure: every wheel the policy removes, with its reason; and the wheels of a stale torch line it keeps
    because their bytes serve a line it keeps (no torch linked, or torch's stable ABI), with why."""
    reasons: dict[str, str] = {}
    present = {e.cell.label.torch for e in index.entries}
    torches = sorted(present if policy.lines is None else set(policy.lines), reverse=True)
    dropped = set(policy.drop_torch)
    if policy.keep_torch is not None:
        kept = torches[: policy.keep_torch]
        newest = ", ".join(format_version(t) for t in kept)
        where = "" if policy.lines is None else " PyTorch shipped"
        dropped.update(present - set(kept))
        for e in index.entries:
            if e.cell.label.torch not in kept:
                reasons.setdefault(
                    e.path,
                    f"torch {format_version(e.cell.label.torch)} is not among the newest {policy.keep_torch}{where} ({newest})",
                )
    for e in index.entries:
        if e.cell.label.torch in policy.drop_torch:
            reasons.setdefault(e.path, f"torch {format_version(e.cell.label.torch)} dropped (--drop-torch)")
    live = [
        t
        for t in torches
        if t not in dropped and (policy.keep_torch is None or t in torches[: policy.keep_torch])
    ]
    names = {e.path: e.name for e in index.entries}  # each filename parsed once
    serving = _serving(index, [e for e in index.entries if e.path in reasons], live, names)
    for path, why in list(serving.items()):
        if policy.drop_serving:  # asked: its line goes, whatever other line its bytes serve
            reasons[path] += f"; it {why.split(':', 1)[0]} too (--drop-serving)"
            del serving[path]
        else:  # its bytes serve a torch line the policy keeps: not stale
            reasons.pop(path)
            serving[path] = f"{why}; --drop-serving drops it"
    groups: dict[tuple[object, ...], list[IndexEntry]] = defaultdict(list)
    for e in index.entries:
        groups[_group(e, names[e.path])].append(e)
    for members in groups.values():
        _group_reasons(members, policy, names, reasons, dropped)
    by_path = index.by_path()
    return [Removal(by_path[p], r) for p, r in sorted(reasons.items())], sorted(serving.items())


def _group_reasons(
    members: list[IndexEntry], policy: GcPolicy, names: Mapping[str, WheelName], reasons: dict[str, str],
    dropped: set[MajorMinor],
) -> None:  # fmt: skip
    """The removals ``--keep-versions`` and ``--older-than`` add within one cell's wheels (``reasons``, by
    path); a kept torch line never loses its last wheel of a (package, sm, python, platform)."""
    members.sort(key=lambda e: names[e.path].version, reverse=True)
    if policy.keep_versions is not None:
        versions = sorted({names[e.path].version for e in members}, reverse=True)
        keep = set(versions[: policy.keep_versions])
        for e in members:
            if names[e.path].version not in keep:
                reasons.setdefault(
                    e.path,
                    f"superseded: keeping the newest {policy.keep_versions} version(s) of this cell ({', '.join(str(v) for v in sorted(keep, reverse=True))})",
                )
    if policy.older_than_days is not None:
        cutoff = policy.now - timedelta(days=policy.older_than_days)
        for e in members:
            added = _added(e)
            if added is not None and added < cutoff:
                reasons.setdefault(e.path, f"published {e.added}, older than {policy.older_than_days} days")
    # A kept torch line never loses its last wheel of a (package, sm, python, platform).
    torch_kept = members[0].cell.label.torch not in dropped
    if torch_kept and all(e.path in reasons for e in members):
        reasons.pop(members[0].path)


def _serving(
    index: Index, stale: Sequence[IndexEntry], live: Sequence[MajorMinor], names: dict[str, WheelName]
) -> dict[str, str]:
    """Of ``stale`` entries, those whose bytes serve one of the ``live`` torch lines that no wheel built for
    that very line (same package, GPU, Python, platform; same or newer version) serves already, with why."""
    found: dict[str, str] = {}
    if not stale or not live:
        return found
    asked: dict[tuple[str, MajorMinor], str | None] = {}  # the same bytes filed in many cells: judged once
    newest: dict[tuple[object, ...], Version] = {}  # (slot, torch line) -> the newest release built for it
    for e in index.entries:
        built_for = (*_slot(e, names[e.path]), e.cell.label.torch)
        release = Version(names[e.path].version.public)
        if built_for not in newest or release > newest[built_for]:
            newest[built_for] = release
    for e in stale:
        name = names[e.path]
        wheel = wheel_of(e)
        release = Version(name.version.public)
        for line in live:  # newest first
            there = newest.get((*_slot(e, name), line))
            if there is not None and there >= release:
                continue  # a build for that line is there: this one is not what serves it
            key = (e.sha256, line)
            if key not in asked:
                asked[key] = serves_line(wheel, line)
            if asked[key] is not None:
                found[e.path] = f"serves torch {format_version(line)}: {asked[key]}"
                break
    return found


def freed_bytes(index: Index, removals: Sequence[Removal]) -> int:
    """Bytes the removals free: each removed blob (by sha256) once, and only if no kept wheel shares it."""
    gone = {r.entry.path for r in removals}
    kept = {e.sha256 for e in index.entries if e.path not in gone}
    kept |= {e.variant.sha256 for e in index.entries if e.path not in gone and e.variant is not None}
    sizes = {r.entry.sha256: r.entry.size for r in removals if r.entry.sha256 not in kept}
    # A variant wheel goes with its source; its bytes are its own (another file, whatever Xet dedupes).
    sizes |= {
        v.sha256: v.size for r in removals if (v := r.entry.variant) is not None and v.sha256 not in kept
    }
    return sum(sizes.values())


def freed_files(index: Index, removals: Sequence[Removal]) -> int:
    """Files the removals take out of the store: each wheel with its METADATA and its variant (each file once,
    as :func:`removed_files` deletes them), and each page or shard they leave empty."""
    after = index.with_entries(removed=[r.entry.path for r in removals])
    # the very files removed_files names (a variant shared by several cells once, METADATA files too)
    return len(removed_files(index, removals)) + len(catalogue_paths(index) - catalogue_paths(after))


def emptied_packages(index: Index, removals: Sequence[Removal]) -> tuple[str, ...]:
    """Packages of which the removals leave no wheel."""
    gone = {r.entry.path for r in removals}
    touched = {r.entry.cell.package for r in removals}
    left = {e.cell.package for e in index.entries if e.path not in gone}
    return tuple(sorted(touched - left))


def gc(
    store: Store,
    default_layout: Layout,
    policy: GcPolicy,
    *,
    act: bool,
    purge: bool = False,
    allow_empty: bool = False,
) -> GcReport:
    """Plan (and with ``act``, apply in one change) the removals; with ``purge``, also free their blobs.

    A plan that leaves a package without any wheel is refused on ``act`` unless ``allow_empty``.
    """
    if act and not store.list_files().complete:  # a dry run lists nothing
        raise StoreError(f"{store.location}: the file listing came back incomplete; gc refuses to act on it")
    if not act:
        return _dry_run(store, default_layout, policy, purge)

    def planner(index: Index) -> tuple[Changes, GcReport]:
        removals, kept = plan_gc_and_kept(index, policy)
        emptied = emptied_packages(index, removals)
        if emptied and not allow_empty:
            raise Refused(
                f"{store.location}: the plan removes every wheel of {', '.join(emptied)}; "
                "pass --allow-empty to accept that (nothing was changed)"
            )
        report = GcReport(
            tuple(removals),
            freed_bytes(index, removals),
            emptied,
            files=freed_files(index, removals),
            kept=tuple(kept),
        )
        paths = tuple(r.entry.path for r in removals)
        message = f"librarian gc: remove {len(paths)} wheel{'s' if len(paths) != 1 else ''}"
        # Each wheel with its PEP 658 METADATA file and its variant, side by side, so that a change cut in
        # pieces takes them together.
        files = removed_files(index, removals)
        return Changes(index.with_entries(removed=paths), (), files, message), report

    applied: Applied[GcReport] = store.update(planner, default_layout)
    report = replace(applied.result, commit=applied.commit, acted=True)
    if purge and isinstance(store, UploadStorage):  # what this gc removed and earlier ones left alike
        blobs = store.purgeable(grace=policy.purge_grace)
        young = _young(store, (), policy.purge_grace, blobs)
        store.purge(blobs)
        report = replace(report, purge=blobs, young=young, grace=policy.purge_grace)
    return report


def _dry_run(store: Store, default_layout: Layout, policy: GcPolicy, purge: bool) -> GcReport:
    """What gc would remove, and with ``purge`` free, changing nothing."""
    index = read_index(store, default_layout)
    removals, kept = plan_gc_and_kept(index, policy)
    blobs = _purgeable(store, removals, policy.purge_grace) if purge else ()
    young = _young(store, removals, policy.purge_grace, blobs) if purge else 0
    return GcReport(tuple(removals), freed_bytes(index, removals), emptied_packages(index, removals), blobs,
                    files=freed_files(index, removals), kept=tuple(kept), young=young,
                    grace=policy.purge_grace)  # fmt: skip


def removed_files(index: Index, removals: Sequence[Removal]) -> tuple[str, ...]:
    """Pure: the files gc deletes: each removed wheel, its METADATA and its variant, but never a variant
    that is not its own (a hostile or broken index names another wheel there) and never a path that an
    entry it keeps names, as its wheel, METADATA or variant."""
    gone = {r.entry.path for r in removals}
    kept = {
        f for e in index.entries if e.path not in gone for f in (e.path, e.metadata_path, e.variant_path) if f
    }
    foreign = foreign_variants(index.entries)
    for r in removals:
        if r.entry.path in foreign:
            log.warning("%s: %s; gc leaves it", r.entry.path, foreign[r.entry.path])
    files = (
        f
        for r in removals
        for f in (
            r.entry.path,
            r.entry.metadata_path,
            None if r.entry.path in foreign else r.entry.variant_path,
        )
        if f
    )
    return tuple(dict.fromkeys(f for f in files if f not in kept))


def _young(store: Store, removals: Sequence[Removal], grace: float, purged: Sequence[Blob]) -> int:
    """How many unreferenced blobs the grace spares (said, so that a purge that spared some says so)."""
    if not grace or not isinstance(store, UploadStorage):
        return 0
    return len(_purgeable(store, removals, 0.0)) - len(purged)


def _purgeable(store: Store, removals: Sequence[Removal], grace: float) -> tuple[Blob, ...]:
    """What ``--purge`` would free: nothing where the store keeps no bytes beyond its files (a directory's
    deleted file, its last hard link gone, is free space already)."""
    if not isinstance(store, UploadStorage):
        return ()
    return store.purgeable(leaving={r.entry.path for r in removals}, grace=grace)
