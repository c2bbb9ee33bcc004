"""reindex: the fan-in half of publishing, and an index made from the tree when a store has none.

A CI matrix of hundreds of jobs cannot all commit the index: each commit carries ``parent_commit``, so
all but one of every race re-plan and retry. With ``publish --stage`` each job instead commits its wheels
plus one pending entry per filed wheel (``index/pending/<store path>.<sha256[:16]>.json``, see
:func:`librarian.index.pending_path`), touching no index file, so the commits never conflict. One final
job runs ``reindex``: it merges every pending entry whose wheel is in the tree, rewrites the shards,
pages and card, and deletes the pending files, in one change planned against one snapshot (one commit
with ``parent_commit`` on the Hub; a stage landing meanwhile makes it re-plan).
"""

from __future__ import annotations

import logging
import tempfile
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from librarian.errors import LibrarianError
from librarian.index import Index, IndexEntry
from librarian.layout import Layout
from librarian.ops.store.adopt import Adoption
from librarian.ops.store.adoption import Adopting, adopt_unindexed
from librarian.ops.store.placement import Problem
from librarian.ops.store.reindex_repair import restore_metadata, variant_changes
from librarian.ops.store.reindex_report import ReindexReport
from librarian.ops.store.reread import Known, refresh_entries
from librarian.ops.store.tree import hasher, is_wheel
from librarian.pending import parse_pending, parse_pending_path
from librarian.stores.base import Changes, Journals, LocalFiles, Store, StoredFile, read_index

log = logging.getLogger(__name__)

READERS = 8  # pending files are tiny; on the Hub each read is a round trip, so read several at once


def _settle(stored: StoredFile | None, staged: Sequence[IndexEntry]) -> tuple[IndexEntry | None, str]:
    """Pure: which staged entry describes the file now at the path (the last stage of a path wins)."""
    if stored is None:
        return None, "its wheel is not in the store"
    if stored.sha256 is not None:
        fits = [e for e in staged if e.sha256 == stored.sha256]
    else:  # no hash without reading the bytes; the caller hashed the file where sizes could not tell
        fits = [e for e in staged if e.size == stored.size]
    if not fits:
        return None, "the stored file is not the wheel staged (another job filed other bytes there)"
    return max(fits, key=lambda e: (e.added, e.sha256)), ""


def plan_reindex(
    index: Index,
    files: Sequence[StoredFile],
    pending: Mapping[str, IndexEntry],
    adopt: Sequence[IndexEntry] = (),
    fresh: Sequence[IndexEntry] = (),
    judged: Collection[str] = (),
) -> tuple[Changes, ReindexReport]:
    """Pure: merge ``pending`` (pending path -> entry) into ``index`` against the tree ``files``; ``fresh``
    entries (re-read from their bytes) replace the ones at their paths, and every bad entry is settled:
    written anew when it is among them, dropped when no wheel of its is in the tree. ``adopt``: entries of
    unindexed wheels to add; ``judged``: the unindexed wheels an adoption named already (not said again)."""
    current = index.by_path()
    by_target, merged, dropped = _merge_staged({f.path: f for f in files}, current, pending)
    renewed = {e.path for e in fresh}
    adopted = [
        e for e in adopt if e.path not in current and e.path not in by_target and e.path not in renewed
    ]
    refreshed = [
        e
        for e in fresh
        if e.path not in by_target and (e.path not in current or _differs(current[e.path], e))
    ]
    settled = [
        Problem(b.where, f"index entry dropped ({b.problem}); no wheel of it to re-read")
        for b in index.bad
        if b.path not in renewed
    ]
    known = set(current) | set(by_target) | {e.path for e in adopted} | renewed | set(judged)
    unindexed = [
        Problem(f.path, "not in the index and not staged ('reindex --adopt' reads it and takes it in)")
        for f in files
        if is_wheel(f.path) and f.path not in known
    ]
    new_index = replace(index.with_entries(added=[*merged, *adopted, *refreshed]), bad=())
    message = (
        f"librarian reindex: {len(merged)} staged wheel(s) merged, {len(pending)} pending file(s) cleared"
    )
    if adopted:
        message += f", {len(adopted)} adopted from the tree"
    if refreshed or settled:
        message += (
            f", {len(refreshed)} entr{'y' if len(refreshed) == 1 else 'ies'} re-read, {len(settled)} dropped"
        )
    # rebuild: every generated file is rewritten from the index where it differs (a killed change's repair).
    changes = Changes(new_index, (), tuple(sorted(pending)), message, rebuild=True)
    repaired = tuple(b.path for b in index.bad if b.path in renewed)
    report = ReindexReport(
        "",
        tuple(merged),
        tuple(adopted),
        dropped=tuple(dropped),
        unindexed=tuple(unindexed),
        cleared=len(pending),
        refreshed=tuple(refreshed),
        repaired=repaired,
        settled=tuple(settled),
    )
    return changes, report


def _merge_staged(
    tree: Mapping[str, StoredFile], current: Mapping[str, IndexEntry], pending: Mapping[str, IndexEntry]
) -> tuple[dict[str, list[tuple[str, IndexEntry]]], list[IndexEntry], list[Problem]]:
    """The staged entries by their wheel's path; those merged (the one the tree holds, where it differs
    from the index's), and the pending files dropped, and why."""
    by_target: dict[str, list[tuple[str, IndexEntry]]] = defaultdict(list)
    for pending_file, entry in sorted(pending.items()):
        by_target[entry.path].append((pending_file, entry))
    merged: list[IndexEntry] = []
    dropped: list[Problem] = []
    for path, staged in sorted(by_target.items()):
        pick, why = _settle(tree.get(path), [e for _, e in staged])
        dropped += [Problem(pending_file, why or f"superseded: {path} holds the bytes staged later")
                    for pending_file, entry in staged if entry is not pick]  # fmt: skip
        old = current.get(path)
        if pick is not None and (old is None or old.sha256 != pick.sha256 or old.size != pick.size):
            merged.append(pick)
    return by_target, merged, dropped


def _differs(old: IndexEntry, new: IndexEntry) -> bool:
    return old.to_json() != new.to_json()


def read_pending(store: Store, files: Iterable[StoredFile]) -> tuple[dict[str, IndexEntry], list[Problem]]:
    """Every pending entry in the listing, read a few at a time; unreadable ones are reported, not raised."""
    paths = [f.path for f in files if parse_pending_path(f.path) is not None]

    def read(path: str) -> IndexEntry | Problem:
        try:
            data = store.read_file(path)
            if data is None:
                return Problem(path, "listed but could not be read")
            return parse_pending(data, path, f"{store.location}/{path}")
        except LibrarianError as e:
            return Problem(path, str(e).split(": ", 1)[-1])

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        results = list(pool.map(read, paths))
    entries = {p: r for p, r in zip(paths, results, strict=True) if isinstance(r, IndexEntry)}
    return entries, [r for r in results if isinstance(r, Problem)]


def _with_adoption(
    changes: Changes, report: ReindexReport, adoption: Adoption, strays: Iterable[tuple[str, str]]
) -> tuple[Changes, ReindexReport]:
    """The change with what the adoption writes and removes (refiled copies), and the report with what it
    adopted as it is, refiled, and left out (wheel files that are links or FIFOs too: never read)."""
    changes = replace(
        changes,
        uploads=(*changes.uploads, *adoption.uploads),
        deletes=(*changes.deletes, *adoption.deletes),
        whole=bool(adoption.entries or adoption.deletes),  # one commit: an interrupted adoption lands nothing
    )
    as_is = {e.path for e in adoption.adopted}
    unread = [Problem(p, f"{why}: not adopted") for p, why in strays if p.endswith(".whl")]
    return changes, replace(
        report,
        adopted=tuple(e for e in report.adopted if e.path in as_is),
        refiled=(*adoption.refiled, *adoption.renames),
        refused=(*adoption.refused, *unread),
    )


def reindex(
    store: Store,
    default_layout: Layout,
    *,
    adopt: bool = False,
    dry_run: bool = False,
    refresh: bool = False,
    variants: bool = False,
    adopting: Adopting | None = None,
    deep: bool = False,
) -> ReindexReport:
    """Merge every staged entry into the index in one change; with ``adopt`` (or ``adopting``: how), also
    take in the wheels of the tree that have no entry, each read from its bytes and judged against its path.

    METADATA files (PEP 658) the index names and the tree lacks are restored from their wheels. Entries
    that failed their checks are written anew from their wheels' bytes; with ``refresh``, every entry is
    (stores written by older versions gain what newer ones record). Variant wheels the index records and
    the tree lacks are made again, and those that are not their source's (judged on a local store, and with
    ``deep`` on any); with ``variants``, every wheel without one gains one.
    """
    if adopt and adopting is None:
        adopting = Adopting()
    with tempfile.TemporaryDirectory(prefix="librarian-reindex-") as tmp:
        run = _Run(store, Path(tmp), adopting, refresh=refresh, variants=variants, dry_run=dry_run, deep=deep)
        if dry_run:
            return run.plan(read_index(store, default_layout))[1]
        # A journal no change can follow (naming a path outside the store) stops every change; reindex,
        # which rebuilds the index from the files, is the way out the error names: it drops it first.
        if isinstance(store, Journals) and (dropped := store.drop_unfollowable_journal()):
            log.warning("%s", dropped)
        applied = store.update(run.plan, default_layout)
    for note in applied.notes:
        log.info("%s", note)
    return replace(applied.result, where=applied.where, commit=applied.commit)


@dataclass
class _Run:
    """One reindex: its planner (run inside the store's update, perhaps more than once: the listing and the
    reads see the snapshot the change applies to), and what it keeps between attempts (pending entries and
    entries re-read, by path)."""

    store: Store
    tmp: Path
    adopting: Adopting | None
    refresh: bool = False
    variants: bool = False
    dry_run: bool = False
    deep: bool = False
    cache: dict[str, IndexEntry] = field(default_factory=dict)
    reread: dict[tuple[str, str | None, int], IndexEntry | Problem] = field(default_factory=dict)

    def plan(self, index: Index) -> tuple[Changes, ReindexReport]:
        store, listing = self.store, self.store.list_files()
        listed = listing.files
        found, unreadable = read_pending(store, [f for f in listed if f.path not in self.cache])
        self.cache.update(found)
        paths = {f.path for f in listed}
        pending = {p: e for p, e in self.cache.items() if p in paths}
        files = _hash_where_sizes_cannot_tell(listed, pending, hasher(store))
        unindexed = _unindexed(files, index, pending)
        adoption = None
        if self.adopting is not None:
            adoption = adopt_unindexed(store, index, unindexed, self.adopting, self.tmp)
        tree = {f.path: f for f in files}
        targets = {b.path: Known(raw=b.raw) for b in index.bad if b.path in tree}
        if self.refresh:
            targets.update({e.path: Known(e) for e in index.entries if e.path in tree})
        read = refresh_entries(store, index.layout, tree, targets, self.reread)
        fresh = [r for r in read if isinstance(r, IndexEntry)]
        adopted = adoption.entries if adoption is not None else ()
        judged = [f.path for f in unindexed] if adoption is not None else ()
        changes, report = plan_reindex(index, files, pending, adopted, fresh, judged)
        report = replace(report, stale=tuple(r for r in read if isinstance(r, Problem)),
                         unreadable=tuple(unreadable), location=store.location)  # fmt: skip
        if adoption is not None:
            changes, report = _with_adoption(changes, report, adoption, listing.strays)
        return self._with_files(changes, report, listed)

    def _with_files(
        self, changes: Changes, report: ReindexReport, listed: Sequence[StoredFile]
    ) -> tuple[Changes, ReindexReport]:
        """The change with the METADATA files the tree lacks and the variant wheels it makes again."""
        own = {u.path for u in changes.uploads}  # an adopted wheel's METADATA: uploaded already
        restores = [
            u for u in restore_metadata(self.store, changes.index, listed, self.tmp) if u.path not in own
        ]
        deep_here = self.deep or isinstance(self.store, LocalFiles)
        changes, made, would = variant_changes(self.store, changes, listed, self.tmp, self.variants,
                                               self.dry_run, deep_here)  # fmt: skip
        changes = replace(changes, uploads=(*changes.uploads, *restores, *made))
        # one variant per build: a dry run names each build by its first wanted entry
        variants = tuple(u.path for u in made) or tuple({e.sha256: e.path for e in would}.values())
        return changes, replace(report, restored=tuple(u.path for u in restores), variants=variants)


def _unindexed(
    files: Sequence[StoredFile], index: Index, pending: Mapping[str, IndexEntry]
) -> list[StoredFile]:
    known = set(index.by_path()) | {e.path for e in pending.values()}
    return [f for f in files if is_wheel(f.path) and f.path not in known]


def _hash_where_sizes_cannot_tell(
    files: Sequence[StoredFile], pending: Mapping[str, IndexEntry], sha_of: Callable[[StoredFile], str]
) -> list[StoredFile]:
    """Hash the stored files that several staged entries of one size claim (rare: racing jobs)."""
    claims: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for entry in pending.values():
        claims[entry.path].add((entry.sha256, entry.size))
    out = []
    for f in files:
        same_size = {sha for sha, size in claims.get(f.path, ()) if size == f.size}
        out.append(replace(f, sha256=sha_of(f)) if f.sha256 is None and len(same_size) > 1 else f)
    return out
