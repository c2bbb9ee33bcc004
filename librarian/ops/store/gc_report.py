"""What gc planned or did, for a person and for ``--json``: each removal with its reason, what is kept and
why, what is purged, and the totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from librarian.index import IndexEntry
from librarian.stores.base import Blob


@dataclass(frozen=True, slots=True)
class Removal:
    """A wheel the plan removes, and why."""

    entry: IndexEntry
    reason: str


@dataclass(frozen=True, slots=True)
class GcReport:
    """What gc planned or did: the removals, the space they free, the blobs purged, the commit made."""

    removals: tuple[Removal, ...]
    freed: int  # bytes of stored content no remaining wheel shares: each blob counted once
    emptied: tuple[str, ...] = ()  # packages the plan removes every wheel of
    purge: tuple[Blob, ...] = ()  # blobs deleted for good (--purge, the Hub)
    commit: str = ""  # the commit's URL, where the store makes commits
    acted: bool = False
    files: int = 0  # files the removals take out of the store: wheels, and pages and shards left empty
    kept: tuple[tuple[str, str], ...] = ()  # wheels of a stale torch line kept: their bytes serve a kept line
    young: int = 0  # blobs --purge spared: nothing references them, but they are younger than the grace
    grace: float = 0.0  # that grace, in seconds

    def to_json(self, location: str) -> dict[str, Any]:
        """The plan (or what was done) for ``--json``."""
        return {
            "schema": 1,
            "repo": location,
            "acted": self.acted,
            "freed": self.freed,
            "files_freed": self.files,
            "commit": self.commit or None,
            "emptied": list(self.emptied),
            "remove": [
                {"path": r.entry.path, "reason": r.reason, "size": r.entry.size} for r in self.removals
            ],
            "kept": [{"path": path, "reason": why} for path, why in self.kept],
            "purge": [{"sha256": b.sha256, "size": b.size, "name": b.name} for b in self.purge],
            "young": self.young,
        }

    def render(self, location: str, *, purge_asked: bool = False) -> str:
        """Each removal with its reason, what is purged, and the totals; said as a plan until it is acted on."""
        acted = self.acted
        lines = [f"{'removed' if acted else 'remove'}  {r.entry.path}  ({r.reason})" for r in self.removals]
        lines += [f"{'kept' if acted else 'keep'}  {path}  ({why})" for path, why in self.kept]
        lines += [
            f"{'purged' if acted else 'purge'}  LFS object {b.sha256[:12]} ({say_size(b.size)}, {b.name})"
            for b in self.purge
        ]
        purged = say_size(sum(b.size for b in self.purge))
        files = f"; {self.files} file(s) in all, pages and shards included" if self.removals else ""
        size = (
            f"{len(self.removals)} wheel file(s), {say_size(self.freed)} of stored content, from {location}"
        )
        if self.young:
            hours = f"{self.grace / 3600:g} h"
            lines.append(
                f"{self.young} unreferenced LFS object(s) younger than {hours} kept (a staged upload may be "
                "waiting for its reindex); --purge-grace 0 removes them"
            )
        if acted:
            gone = f"; {len(self.purge)} LFS object(s), {purged}, deleted for good" if self.purge else ""
            lines.append(f"removed {size}{gone}{files}")
            if self.commit:
                lines.append(f"commit {self.commit}")
            if self.removals and not purge_asked and self.commit:
                lines.append(
                    "the Hub keeps removed files in the repo's history; 'gc --purge' frees that storage"
                )
            return "\n".join(lines)
        if self.emptied:
            lines.append(
                f"warning: this plan removes every wheel of {', '.join(self.emptied)}; --yes needs --allow-empty"
            )
        will = f"; {len(self.purge)} LFS object(s), {purged}, would be deleted for good" if self.purge else ""
        lines.append(f"plan: remove {size}{will}{files}; nothing changed (pass --yes to act)")
        return "\n".join(lines)


def say_size(n: int) -> str:
    """``512 bytes``, ``3.2 KB``, ``4.5 MB``, ``1.2 GB``: small removals are not "0.0 MB"."""
    if n < 1000:
        return f"{n} bytes"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < scale * 1000 or unit == "GB":
            return f"{n / scale:.1f} {unit}"
    raise AssertionError("unreachable")
