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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from librarian.errors import LibrarianError
from librarian.index import Index, IndexEntry
from librarian.layout import Layout
from librarian.ops.store.adopt import Adoption, Refiled
from librarian.ops.store.adoption import Adopting, adopt_unindexed
from librarian.ops.store.placement import Problem
from librarian.ops.store.reindex_repair import restore_metadata, variant_changes
from librarian.ops.store.reread import Known, refresh_entries
from librarian.ops.store.tree import hasher, is_wheel
from librarian.pending import parse_pending, parse_pending_path
from librarian.stores.base import Changes, Journals, LocalFiles, Store, StoredFile, read_index

log = logging.getLogger(__name__)

READERS = 8  # pending files are tiny; on the Hub each read is a round trip, so read several at once


@dataclass(frozen=True, slots=True)
class ReindexReport:
    """What reindex did (or, with ``dry_run``, would do)."""

    location: str
    merged: tuple[IndexEntry, ...] = ()  # staged entries now in the index
    adopted: tuple[IndexEntry, ...] = ()  # wheels in the tree with no entry, read and indexed at their paths
    refiled: tuple[Refiled, ...] = ()  # misfiled wheels filed where their bytes serve
    refused: tuple[Problem, ...] = ()  # unindexed wheels adoption left out, each with what fails
    dropped: tuple[Problem, ...] = ()  # pending files deleted without merging, and why
    unindexed: tuple[Problem, ...] = ()  # wheels in the tree neither indexed nor staged (not adopted)
    unreadable: tuple[Problem, ...] = ()  # pending files left in place: they could not be read
    cleared: int = 0  # pending files deleted
    restored: tuple[str, ...] = ()  # PEP 658 METADATA files the index names and the tree lacked, rewritten
    variants: tuple[str, ...] = ()  # variant wheels made (the tree lacked them, or --variants asked)
    manifests: int = 0  # stage manifests read (reindex --manifest)
    refreshed: tuple[IndexEntry, ...] = ()  # entries written anew from their bytes (--refresh, or repaired)
    repaired: tuple[str, ...] = ()  # of those, the paths whose entries had failed their checks
    settled: tuple[Problem, ...] = ()  # bad entries dropped: no wheel of theirs is in the tree
    stale: tuple[Problem, ...] = ()  # entries whose bytes could not be re-read (left as they were)
    where: str = ""
    commit: str = ""  # the commit's web URL, where the store makes commits (the Hub)

    @property
    def changed(self) -> bool:
        """Whether the store changed (or would)."""
        return bool(
            self.merged
            or self.adopted
            or self.refiled
            or self.cleared
            or self.restored
            or self.refreshed
            or self.settled
            or self.variants
        )

    @property
    def findings(self) -> tuple[Problem, ...]:
        """What a CI job should fail on: staged wheels that did not make it, files the index lacks."""
        return (*self.dropped, *self.unindexed, *self.refused, *self.unreadable, *self.stale)


def render_reindex(report: ReindexReport, dry_run: bool = False) -> str:
    """What reindex did, a line per wheel and finding, and a summary."""
    lines = [f"{'would merge' if dry_run else 'merged':>11}  {e.path}" for e in report.merged]
    lines += [f"{'would adopt' if dry_run else 'adopted':>11}  {e.path}" for e in report.adopted]
    lines += [
        f"{('would relabel' if dry_run else 'relabelled') if r.renamed else ('would refile' if dry_run else 'refiled'):>11}  {r}"
        for r in report.refiled
    ]
    lines += [f"{'would restore' if dry_run else 'restored':>11}  {p}" for p in report.restored]
    lines += [f"{'would make' if dry_run else 'made':>11}  {p}" for p in report.variants]
    repaired = set(report.repaired)
    lines += [
        f"{('would repair' if dry_run else 'repaired') if e.path in repaired else ('would refresh' if dry_run else 'refreshed'):>11}"
        f"  {e.path}"
        for e in report.refreshed
    ]
    lines += [f"{'would drop' if dry_run else 'dropped':>11}  {p}" for p in report.settled]
    lines += [str(p) for p in report.findings]
    if not report.changed:
        return "\n".join([*lines, f"nothing to reindex in {report.location}"])
    merged = f"{'would merge' if dry_run else 'merged'} {len(report.merged)} staged wheel(s), "
    if report.manifests:
        merged += f"from {report.manifests} manifest(s), into {report.location}"
    else:
        merged += f"cleared {report.cleared} pending file(s) in {report.location}"
    summary = merged
    if report.adopted or report.refiled:
        summary = _adopted(report, dry_run) + (f"; {merged}" if report.merged or report.cleared else "")
    summary += f" ({len(report.restored)} METADATA file(s) restored)" if report.restored else ""
    summary += f" ({len(report.variants)} variant wheel(s) made)" if report.variants else ""
    summary += (
        f" ({len(report.refreshed)} entr{'y' if len(report.refreshed) == 1 else 'ies'} re-read from their bytes)"
        if report.refreshed
        else ""
    )
    commit = [f"commit {report.commit}"] if report.commit else []
    return "\n".join([*lines, summary + (" (dry run: nothing changed)" if dry_run else ""), *commit])


def _adopted(report: ReindexReport, dry_run: bool) -> str:
    """``adopted 4 wheel(s) into ./hand (1 refiled, 2 left out)``."""
    said = f"{'would adopt' if dry_run else 'adopted'} {len(report.adopted)} wheel(s) into {report.location}"
    moved = [r for r in report.refiled if not r.renamed]
    renamed = len(report.refiled) - len(moved)
    more = [f"{len(moved)} refiled"] if moved else []
    more += [f"{renamed} relabelled"] if renamed else []
    more += [f"{len(report.refused)} left out"] if report.refused else []
    return said + (f" ({', '.join(more)})" if more else "")


def reindex_json(report: ReindexReport) -> dict[str, Any]:
    """The report for ``--json``."""
    return {
        "repo": report.location,
        "changed": report.changed,
        "merged": [e.path for e in report.merged],
        "adopted": [e.path for e in report.adopted],
        "refiled": [{"path": r.path, "to": list(r.to)} for r in report.refiled],
        "cleared": report.cleared,
        "restored": list(report.restored),
        "variants": list(report.variants),
        "manifests": report.manifests,
        "refreshed": [e.path for e in report.refreshed if e.path not in report.repaired],
        "repaired": list(report.repaired),
        "settled": [{"path": p.path, "problem": p.problem} for p in report.settled],
        "commit": report.commit or None,
        "problems": [{"path": p.path, "problem": p.problem} for p in report.findings],
    }


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
    tree = {f.path: f for f in files}
    current = index.by_path()
    by_target: dict[str, list[tuple[str, IndexEntry]]] = defaultdict(list)
    for pending_file, entry in sorted(pending.items()):
        by_target[entry.path].append((pending_file, entry))
    merged: list[IndexEntry] = []
    dropped: list[Problem] = []
    for path, staged in sorted(by_target.items()):
        pick, why = _settle(tree.get(path), [e for _, e in staged])
        for pending_file, entry in staged:
            if entry is not pick:
                dropped.append(
                    Problem(pending_file, why or f"superseded: {path} holds the bytes staged later")
                )
        old = current.get(path)
        if pick is not None and (old is None or old.sha256 != pick.sha256 or old.size != pick.size):
            merged.append(pick)
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
    cache: dict[str, IndexEntry] = {}
    reread: dict[tuple[str, str | None, int], IndexEntry | Problem] = {}
    sha_of = hasher(store)
    with tempfile.TemporaryDirectory(prefix="librarian-reindex-") as tmp:

        def planner(index: Index) -> tuple[Changes, ReindexReport]:
            # Runs inside the store's update: the listing and the reads see the snapshot the change applies to.
            listing = store.list_files()
            listed = listing.files
            found, unreadable = read_pending(store, [f for f in listed if f.path not in cache])
            cache.update(found)
            paths = {f.path for f in listed}
            pending = {p: e for p, e in cache.items() if p in paths}
            files = _hash_where_sizes_cannot_tell(listed, pending, sha_of)
            unindexed = _unindexed(files, index, pending)
            adoption = (
                adopt_unindexed(store, index, unindexed, adopting, Path(tmp))
                if adopting is not None
                else None
            )
            tree = {f.path: f for f in files}
            targets = {b.path: Known(raw=b.raw) for b in index.bad if b.path in tree}
            if refresh:
                targets.update({e.path: Known(e) for e in index.entries if e.path in tree})
            read = refresh_entries(store, index.layout, tree, targets, reread)
            fresh = [r for r in read if isinstance(r, IndexEntry)]
            adopted = adoption.entries if adoption is not None else ()
            judged = [f.path for f in unindexed] if adoption is not None else ()
            changes, report = plan_reindex(index, files, pending, adopted, fresh, judged)
            report = replace(report, stale=tuple(r for r in read if isinstance(r, Problem)))
            if adoption is not None:
                changes, report = _with_adoption(changes, report, adoption, listing.strays)
            own = {u.path for u in changes.uploads}  # an adopted wheel's METADATA: uploaded already
            restores = [
                u for u in restore_metadata(store, changes.index, listed, Path(tmp)) if u.path not in own
            ]
            deep_here = deep or isinstance(store, LocalFiles)
            changes, made, would = variant_changes(
                store, changes, listed, Path(tmp), variants, dry_run, deep_here
            )
            changes = replace(changes, uploads=(*changes.uploads, *restores, *made))
            restored = tuple(u.path for u in restores)
            return changes, replace(
                report,
                unreadable=tuple(unreadable),
                location=store.location,
                restored=restored,
                # one variant per build: a dry run names each build by its first wanted entry
                variants=tuple(u.path for u in made) or tuple({e.sha256: e.path for e in would}.values()),
            )

        if dry_run:
            return planner(read_index(store, default_layout))[1]
        # A journal no change can follow (naming a path outside the store) stops every change; reindex,
        # which rebuilds the index from the files, is the way out the error names: it drops it first.
        if isinstance(store, Journals) and (dropped := store.drop_unfollowable_journal()):
            log.warning("%s", dropped)
        applied = store.update(planner, default_layout)
    for note in applied.notes:
        log.info("%s", note)
    return replace(applied.result, where=applied.where, commit=applied.commit)


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
