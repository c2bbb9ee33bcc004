"""What reindex did (or would do), as a value: for a person (:func:`render_reindex`) and for ``--json``
(:func:`reindex_json`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from librarian.index import IndexEntry
from librarian.ops.store.adopt import Refiled
from librarian.ops.store.placement import Problem


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
