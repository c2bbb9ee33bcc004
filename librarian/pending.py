"""Staged entries (``publish --stage``) waiting for ``reindex``: their paths and files. Pure.

They wait under ``index/pending/``: that folder is librarian's own (no layout files wheels there, and no
shard path, ``index/<package>.json``, is a folder).
"""

from __future__ import annotations

from librarian.errors import StoreError
from librarian.index import SHARD_DIR, IndexEntry
from librarian.index_files import SCHEMA, load_json
from librarian.jsonfile import dump_json

PENDING_DIR = f"{SHARD_DIR}/pending"
_PENDING_SHA = 16  # hex digits of the wheel's sha256 in a pending file's name


def pending_path(entry: IndexEntry) -> str:
    """Where a staged entry waits for ``reindex``: ``index/pending/<store path>.<sha256[:16]>.json``.

    One name per (store path, bytes): two jobs write the same name only when they stage the very same
    wheel at the very same path, and then either file is right. So staging commits never collide.
    """
    return f"{PENDING_DIR}/{entry.path}.{entry.sha256[:_PENDING_SHA]}.json"


def parse_pending_path(path: str) -> tuple[str, str] | None:
    """The (store path, sha256 prefix) a pending file stands for, or ``None`` if ``path`` is not one."""
    if not path.startswith(PENDING_DIR + "/") or not path.endswith(".json"):
        return None
    stem = path[len(PENDING_DIR) + 1 : -len(".json")]
    wheel, _, sha = stem.rpartition(".")
    if (
        not wheel.endswith(".whl")
        or len(sha) != _PENDING_SHA
        or any(c not in "0123456789abcdef" for c in sha)
    ):
        return None
    return wheel, sha


def render_pending(entry: IndexEntry) -> bytes:
    """A pending file's bytes: the entry as its shard will hold it."""
    return dump_json({"schema": SCHEMA, "entry": entry.to_json()})


def parse_pending(text: bytes, path: str, source: str) -> IndexEntry:
    """Parse the pending file at store path ``path``; it must describe the wheel its name says."""
    data = load_json(text, source)
    raw = data.get("entry")
    if not isinstance(raw, dict):
        raise StoreError(f"{source}: malformed pending entry (no entry object)")
    entry = IndexEntry.from_json(raw, source)
    if parse_pending_path(path) != (entry.path, entry.sha256[:_PENDING_SHA]):
        raise StoreError(f"{source}: entry for {entry.path} does not match the file's name")
    return entry
