"""gc: prune stale torch lines and superseded versions, in one change with the index.

The plan is pure (``plan_gc``) and lists every wheel it removes with its reason. It never removes the
last wheel of a (package, sm, python, platform) on a torch line it keeps.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from librarian.coords import MajorMinor, format_version
from librarian.errors import StoreError
from librarian.index import Index, IndexEntry
from librarian.layout import Layout
from librarian.stores.base import Applied, Changes, Store, read_index


@dataclass(frozen=True, slots=True)
class GcPolicy:
    """Which wheels to drop; all rules combine."""

    keep_torch: int | None = None  # keep the newest N torch minors present in the store (or in `lines`)
    drop_torch: tuple[MajorMinor, ...] = ()
    keep_versions: int | None = None  # per (cell, python, platform)
    older_than_days: int | None = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    lines: tuple[MajorMinor, ...] | None = None  # the torch lines to count the newest N from (the matrix's)

    @property
    def empty(self) -> bool:
        """Whether no rule is set (gc then removes nothing)."""
        return (
            self.keep_torch is None
            and not self.drop_torch
            and self.keep_versions is None
            and self.older_than_days is None
        )


@dataclass(frozen=True, slots=True)
class Removal:
    """A wheel the plan removes, and why."""

    entry: IndexEntry
    reason: str


def _group(entry: IndexEntry) -> tuple[str, str, MajorMinor, MajorMinor, str, str]:
    name = entry.name
    return (
        entry.cell.package,
        entry.cell.sm.sm,
        entry.cell.label.torch,
        entry.cell.label.cuda,
        name.python_tag,
        name.platform_tag,
    )


def _added(entry: IndexEntry) -> datetime | None:
    try:
        return datetime.strptime(entry.added, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def plan_gc(index: Index, policy: GcPolicy) -> list[Removal]:
    """Pure: every wheel the policy removes, with its reason, in path order."""
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
    groups: dict[tuple[object, ...], list[IndexEntry]] = defaultdict(list)
    for e in index.entries:
        groups[_group(e)].append(e)
    for members in groups.values():
        members.sort(key=lambda e: e.name.version, reverse=True)
        if policy.keep_versions is not None:
            versions = sorted({e.name.version for e in members}, reverse=True)
            keep = set(versions[: policy.keep_versions])
            for e in members:
                if e.name.version not in keep:
                    reasons.setdefault(
                        e.path,
                        f"superseded: keeping the newest {policy.keep_versions} version(s) of this cell ({', '.join(str(v) for v in sorted(keep, reverse=True))})",
                    )
        if policy.older_than_days is not None:
            cutoff = policy.now - timedelta(days=policy.older_than_days)
            for e in members:
                added = _added(e)
                if added is not None and added < cutoff:
                    reasons.setdefault(
                        e.path, f"published {e.added}, older than {policy.older_than_days} days"
                    )
        # A kept torch line never loses its last wheel of a (package, sm, python, platform).
        torch_kept = members[0].cell.label.torch not in dropped
        if torch_kept and all(e.path in reasons for e in members):
            reasons.pop(members[0].path)
    by_path = index.by_path()
    return [Removal(by_path[p], r) for p, r in sorted(reasons.items())]


def gc(store: Store, default_layout: Layout, policy: GcPolicy, *, act: bool) -> list[Removal]:
    """Plan (and with ``act``, apply in one change) the removals."""
    listing = store.list_files()
    if act and not listing.complete:
        raise StoreError(f"{store.location}: the file listing came back incomplete; gc refuses to act on it")
    if not act:
        return plan_gc(read_index(store, default_layout), policy)
    holder: list[list[Removal]] = []

    def planner(index: Index) -> Changes:
        removals = plan_gc(index, policy)
        holder[:] = [removals]
        paths = tuple(r.entry.path for r in removals)
        message = f"librarian gc: remove {len(paths)} wheel{'s' if len(paths) != 1 else ''}"
        return Changes(index.with_entries(removed=paths), (), paths, message)

    applied: Applied = store.update(planner, default_layout)
    del applied
    return holder[0] if holder else []


def summarize(removals: Sequence[Removal]) -> int:
    """Total bytes the removals free."""
    return sum(r.entry.size for r in removals)
