"""Index entries made anew from the stored bytes: ``reindex --refresh``, and the repair of bad entries.

An entry written by an older librarian lacks what newer ones record (which members are extension
modules, say); an entry that fails its checks (a corrupt field) poisons only itself until it is written
anew. Both are the same work: read the wheel at the entry's path once (metadata and binaries), and keep
what only the entry knew (when it was published, the overrides it was published with).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from librarian.coords import WheelName
from librarian.errors import LibrarianError
from librarian.index import IndexEntry
from librarian.layout import Layout
from librarian.ops.store.placement import Problem
from librarian.safeio import sha256_file
from librarian.stores.base import Store, StoredFile
from librarian.wheel import OpenedWheel


@dataclass(frozen=True, slots=True)
class Known:
    """What only the old entry knew: a parsed entry, or the raw JSON of one that failed its checks."""

    entry: IndexEntry | None = None
    raw: Any = None

    @property
    def added(self) -> str:
        """When it was published, where that is readable."""
        if self.entry is not None:
            return self.entry.added
        added = self.raw.get("added") if isinstance(self.raw, dict) else None
        return added if isinstance(added, str) and len(added) <= 64 else ""

    @property
    def overrides(self) -> tuple[str, ...]:
        """The flags it was published with, where those are readable."""
        if self.entry is not None:
            return self.entry.overrides
        flags = self.raw.get("overrides") if isinstance(self.raw, dict) else None
        ok = isinstance(flags, list) and all(
            isinstance(f, str) and f.startswith("--") and len(f) <= 64 for f in flags
        )
        return tuple(flags) if ok and isinstance(flags, list) else ()


def entry_from_bytes(store: Store, layout: Layout, stored: StoredFile, known: Known) -> IndexEntry | Problem:
    """The entry the wheel at ``stored.path`` deserves, read from its bytes; a Problem if they cannot be read."""
    parsed = layout.parse_path(stored.path)
    if parsed is None:
        return Problem(stored.path, f"not where layout {layout.name!r} puts wheels; not re-read")
    cell, filename = parsed
    try:
        with store.open(stored.path) as file:
            local = Path(file.name)
            read = OpenedWheel.at(local, WheelName.parse(filename)).deep(record=False, jobs=1)
            failure = read.unreadable or read.failure
            if failure is not None:
                raise failure
            assert read.info is not None and read.facts is not None
            sha = stored.sha256 or sha256_file(local)
    except LibrarianError as e:
        return Problem(
            stored.path,
            f"cannot re-read its bytes ({str(e).split(': ', 1)[-1]}); its entry is left as it was",
        )
    info = read.info
    return IndexEntry(
        stored.path,
        sha,
        stored.size,
        cell,
        known.added,
        read.facts,
        info.requires_python,
        hashlib.sha256(info.metadata).hexdigest(),
        known.overrides,
        # The variant beside it was made from these bytes only if they are the ones the old entry named.
        known.entry.variant if known.entry is not None and known.entry.sha256 == sha else None,
    )


def refresh_entries(
    store: Store,
    layout: Layout,
    files: Mapping[str, StoredFile],
    targets: Mapping[str, Known],
    cache: dict[tuple[str, str | None, int], IndexEntry | Problem],
) -> list[IndexEntry | Problem]:
    """Each target path's new entry (or why not); ``cache`` keeps what a re-plan of the same run read."""
    out = []
    for path, known in sorted(targets.items()):
        stored = files[path]
        key = (path, stored.sha256, stored.size)
        if key not in cache:
            cache[key] = entry_from_bytes(store, layout, stored, known)
        out.append(cache[key])
    return out
