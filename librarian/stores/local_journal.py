"""The local store's journal of a change (``.librarian-journal.json``): its one writer and its one reader.

Written before the first byte of a change, removed after the last; a change killed half-way leaves it, and
the next change under the lock (or ``reindex``) finishes what it names. Every path it names is checked to
stay inside the store before it is followed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from librarian.errors import LayoutError, StoreError
from librarian.index import Index, IndexEntry
from librarian.layout import check_store_path

JOURNAL_NAME = ".librarian-journal.json"
SCHEMA = 1
WAY_OUT = "nothing was done; 'librarian reindex' drops it and rebuilds the index from the files"


@dataclass(frozen=True)
class Journal:
    """What a change does to the index and the tree: entries it adds or changes, paths it unlists, files it
    deletes."""

    added: tuple[IndexEntry, ...]
    unlisted: tuple[str, ...]
    deletes: tuple[str, ...]

    @classmethod
    def of_change(cls, old: Index, new: Index, deletes: Iterable[str]) -> Journal:
        """Pure: the entries ``new`` adds or changes against ``old``, and the paths it no longer lists."""
        before = old.by_path()
        after = new.by_path()
        added = tuple(e for p, e in after.items() if (b := before.get(p)) is None or b != e)
        return cls(added, tuple(sorted(set(before) - set(after))), tuple(sorted(deletes)))

    def to_bytes(self) -> bytes:
        data = {
            "schema": SCHEMA,
            "add": [e.to_json() for e in self.added],
            "unlist": sorted(self.unlisted),
            "delete": sorted(self.deletes),
        }
        return json.dumps(data, sort_keys=True).encode()


def parse_journal(raw: bytes, journal: Path) -> Journal:
    """The journal in ``raw``; StoreError (one line, naming ``journal``) if it cannot be followed safely."""
    try:
        data = json.loads(raw)
        added = tuple(IndexEntry.from_json(e, str(journal)) for e in data["add"])
        unlisted = tuple(str(p) for p in data["unlist"])
        deletes = tuple(str(p) for p in data["delete"])
    except (ValueError, KeyError, TypeError, RecursionError, StoreError) as e:
        raise StoreError(f"{journal}: unreadable journal of an interrupted change ({e}); {WAY_OUT}") from e
    for key, paths in (("add", [e.path for e in added]), ("unlist", unlisted), ("delete", deletes)):
        for path in paths:
            try:
                check_store_path(path)
            except LayoutError as e:  # followed, it would write or delete outside the store
                raise StoreError(
                    f"{journal}: its {key!r} entry {path[:200]!r} is outside the store; {WAY_OUT}"
                ) from e
    return Journal(added, unlisted, deletes)
