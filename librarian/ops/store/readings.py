"""What stored wheels' bytes say, read once each: ``reindex --adopt`` reads every unindexed wheel of a tree.

A :class:`Reading` is what a deep read of one wheel found (its facts, METADATA, Requires-Python and
Requires-Dist on torch, and every problem ``verify --deep`` would name in the bytes), kept on this machine
by sha256 and filename (:class:`ReadingCache`), so that an adoption that was interrupted, or re-planned
on a conflict, or run again on the same wheelhouse, reads no wheel twice: on the Hub, whose listing gives
each LFS file's sha256, a wheel read before is not even downloaded. Wheels are read ``jobs`` at a time,
each streamed (headers and fatbin entry headers; native members inflated one at a time, never the wheel).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from librarian import progress
from librarian.coords import WheelName
from librarian.errors import LibrarianError
from librarian.facts import WheelFacts, facts_from_json, facts_to_json
from librarian.jsonfile import dump_json
from librarian.platforms import canonical_facts
from librarian.pool import default_jobs, ordered_map
from librarian.safeio import atomic_write, read_regular, sha256_stream, user_cache_dir
from librarian.stores.base import Store, StoredFile
from librarian.wheel import OpenedWheel

log = logging.getLogger(__name__)

SCHEMA = 1
MAX_READING_BYTES = 64 << 20  # a reading of flashinfer-cubin's 16,000 members is a few MB


@dataclass(frozen=True, slots=True)
class Reading:
    """What one stored wheel's bytes say: the facts its binaries demand and what its METADATA says, or the
    problems that keep it out of a store (not a zip, RECORD lies, METADATA against its filename, a member
    the readers refuse), in the words ``verify --deep`` uses."""

    sha256: str
    size: int
    problems: tuple[str, ...] = ()
    facts: WheelFacts | None = None
    requires_python: str | None = None
    requires_torch: str | None = None
    metadata: bytes = b""

    @property
    def metadata_sha256(self) -> str | None:
        """Of its METADATA (served beside it, PEP 658), where it was read."""
        return hashlib.sha256(self.metadata).hexdigest() if self.metadata else None

    def to_json(self, filename: str) -> dict[str, Any]:
        """As the cache keeps it."""
        return {
            "schema": SCHEMA,
            "filename": filename,
            "sha256": self.sha256,
            "size": self.size,
            "problems": list(self.problems),
            "facts": facts_to_json(self.facts) if self.facts is not None else None,
            "requires_python": self.requires_python,
            "requires_torch": self.requires_torch,
            "metadata": base64.b64encode(self.metadata).decode(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], filename: str) -> Reading:
        """Back from the cache (ValueError, TypeError or KeyError on anything it did not write)."""
        if data.get("schema") != SCHEMA or data.get("filename") != filename:
            raise ValueError("another schema or wheel")
        facts = data["facts"]
        problems = data["problems"]
        if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
            raise TypeError("problems")
        for key in ("requires_python", "requires_torch"):
            if data[key] is not None and not isinstance(data[key], str):
                raise TypeError(key)
        return cls(
            str(data["sha256"]),
            int(data["size"]),
            tuple(problems),
            canonical_facts(facts_from_json(filename, facts)) if isinstance(facts, dict) else None,
            data["requires_python"],
            data["requires_torch"],
            base64.b64decode(data["metadata"], validate=True),
        )


def reading_of(local: Path, name: WheelName, sha256: str, size: int) -> Reading:
    """Read the wheel at ``local`` (named ``name`` in the store) once, as ``verify --deep`` reads it."""
    try:
        found = OpenedWheel.at(local, name).deep(jobs=1)
    except LibrarianError as e:
        return Reading(sha256, size, (_local_words(str(e), local),))
    if found.unreadable is not None:
        return Reading(sha256, size, (_local_words(str(found.unreadable), local),))
    if found.liar is not None:
        return Reading(sha256, size, (found.liar,))
    problems = list(found.problems)
    if found.failure is not None:
        problems.append(_local_words(str(found.failure), local))
    info = found.info
    assert info is not None
    return Reading(
        sha256,
        size,
        tuple(problems),
        found.facts if found.failure is None else None,
        info.requires_python,
        info.requires_torch,
        info.metadata,
    )


def _local_words(text: str, local: Path) -> str:
    """A reader's message without the temporary path it named (the caller names the store path)."""
    return text.removeprefix(f"{local}: ").replace(str(local), local.name)


class ReadingCache:
    """Readings on this machine, one small JSON file per (sha256, filename), under the user's cache folder
    (``$LIBRARIAN_CACHE/readings``, else ``~/.cache/librarian/readings``). A cache that cannot be read or
    written is no reason to fail: the wheel is read again."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else user_cache_dir() / "readings"

    def _file(self, sha256: str, filename: str) -> Path:
        named = hashlib.sha256(filename.encode()).hexdigest()[:16]
        return self.root / sha256[:2] / f"{sha256}-{named}.json"

    def get(self, sha256: str, filename: str) -> Reading | None:
        """The reading of these bytes under this name, if this machine made one."""
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        try:
            data = json.loads(read_regular(self._file(sha256, filename), MAX_READING_BYTES))
            found = Reading.from_json(data, filename)
        except (OSError, ValueError, TypeError, KeyError, RecursionError, LibrarianError) as e:
            if not isinstance(e, FileNotFoundError):
                log.debug("reading cache: %s of %s not used (%s)", sha256[:12], filename, e)
            return None
        return found if found.sha256 == sha256 else None

    def put(self, filename: str, reading: Reading) -> None:
        """Keep a reading (temp file, then rename)."""
        try:
            atomic_write(self._file(reading.sha256, filename), dump_json(reading.to_json(filename)))
        except (OSError, ValueError) as e:
            log.debug("reading cache: cannot keep %s (%s)", filename, e)


def read_stored(
    store: Store,
    files: Sequence[StoredFile],
    cache: ReadingCache,
    *,
    jobs: int | None = None,
    held: dict[str, Reading] | None = None,
) -> dict[str, Reading]:
    """Each stored wheel's reading, by path: from ``held`` (an earlier plan of this run), the cache (where
    the listing gives the sha256, nothing is downloaded), else its bytes, ``jobs`` wheels at a time."""
    held = {} if held is None else held
    todo = [f for f in files if f.path not in held or held[f.path].size != f.size]
    # The same bytes under the same name in several cells (the listing says so by sha256) are read once.
    first: dict[object, StoredFile] = {}
    for f in todo:
        first.setdefault((f.sha256, f.path.rsplit("/", 1)[-1]) if f.sha256 else f.path, f)
    unique = list(first.values())
    with progress.overall(f"read {store.location}", len(unique)) as bar:

        def read(f: StoredFile) -> Reading:
            found = read_one(store, f, cache)
            bar.advance()
            return found

        done = dict(zip(unique, ordered_map(read, unique, jobs or default_jobs(), "adopt"), strict=True))
    for f in todo:
        held[f.path] = done[first[(f.sha256, f.path.rsplit("/", 1)[-1]) if f.sha256 else f.path]]
    return {f.path: held[f.path] for f in files}


def read_one(store: Store, f: StoredFile, cache: ReadingCache) -> Reading:
    """One stored wheel's reading: the cache's where the listing's sha256 finds one, else its bytes (hashed
    as they are read, and the cache asked again: the same bytes under another path were read before)."""
    filename = f.path.rsplit("/", 1)[-1]
    name = WheelName.parse(filename)
    if f.sha256 is not None and (known := cache.get(f.sha256, filename)) is not None:
        return known
    try:
        with store.open(f.path) as file:
            sha = f.sha256 or sha256_stream(file)
            if (known := cache.get(sha, filename)) is not None:
                return known
            size = os.fstat(file.fileno()).st_size
            found = reading_of(Path(file.name), name, sha, size)
    except LibrarianError as e:
        return Reading(f.sha256 or "", f.size, (str(e).split(": ", 1)[-1],))
    cache.put(filename, found)
    return found
