"""The Hub store's read cache on this machine: small files (index, shards) by commit, the newest head seen
of each revision, and the wheels downloaded by their sha256, so that ``HF_HUB_OFFLINE=1`` (or a Hub that
stays unreachable) reads a known commit and serves the wheels fetched before, whichever commit fetched them."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import quote

from huggingface_hub import constants

from librarian.safeio import TMP_PREFIX, atomic_path, atomic_write, sha256_file

log = logging.getLogger(__name__)

KEEP_COMMITS = 8  # commits whose index files the cache keeps (besides each revision's newest head)
KEEP_WHEELS = 16  # downloaded wheels the cache keeps, the most recently used first
_HEX = frozenset("0123456789abcdef")


def _is_sha256(text: str) -> bool:
    """Whether ``text`` is a sha256 in hex: only such a name reaches the disk as a blob's."""
    return len(text) == 64 and _HEX.issuperset(text)


class ReadCache:
    """Small files of this repo by commit, and the newest head seen of each revision, on this machine."""

    def __init__(self, repo_id: str) -> None:
        base = os.environ.get("LIBRARIAN_CACHE") or os.path.join(constants.HF_HOME, "librarian")
        folder = f"datasets--{repo_id.replace('/', '--')}"
        self.root = Path(base) / "hub" / folder
        # huggingface_hub's own cache names an LFS file's blob by its sha256: a wheel that `hf download`
        # (or hf_hub_download) fetched is found there too. Only read: that cache is the client's to manage.
        self._hf_blobs = Path(constants.HF_HUB_CACHE) / folder / "blobs"

    def _ref(self, revision: str) -> Path:
        return self.root / "refs" / quote(revision, safe="")

    def head(self, revision: str) -> str | None:
        """The newest commit of ``revision`` seen here (by commit date, not file time)."""
        found = self.head_dated(revision)
        return found[0] if found else None

    def head_dated(self, revision: str) -> tuple[str, str] | None:
        """The newest commit of ``revision`` seen here and its date (ISO 8601; ``""`` when unknown)."""
        try:
            known = json.loads(self._ref(revision).read_text())
            return str(known["sha"]), str(known.get("date", ""))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remember_head(self, revision: str, sha: str, date: str) -> None:
        """Record ``sha`` as the head of ``revision`` unless a newer commit is recorded already."""
        try:
            known = json.loads(self._ref(revision).read_text())
            if str(known.get("date", "")) > date:
                return
        except (OSError, ValueError, AttributeError):
            pass
        self._write(self._ref(revision), json.dumps({"sha": sha, "date": date}).encode())

    def get(self, sha: str, path: str) -> bytes | None:
        try:
            return (self.root / "files" / sha / path).read_bytes()
        except OSError:
            return None

    def put(self, sha: str, path: str, data: bytes) -> None:
        fresh = not (self.root / "files" / sha).is_dir()
        try:
            self._write(self.root / "files" / sha / path, data)
            if fresh:
                self._prune()
        except OSError as e:  # a cache that cannot be written is no reason to fail a read
            log.debug("cannot cache %s: %s", path, e)

    def wheel(self, sha256: str) -> Path | None:
        """A file on this machine holding exactly the bytes of ``sha256`` (checked now), or ``None``."""
        if not _is_sha256(sha256):
            return None
        for found in (self.root / "blobs" / sha256, self._hf_blobs / sha256):
            try:
                if found.is_file() and sha256_file(found) == sha256:
                    os.utime(found)  # most recently used: pruned last
                    return found
            except OSError:
                continue
            log.debug("cached %s does not hold its bytes; not used", found)
        return None

    def keep_wheel(self, sha256: str, downloaded: Path) -> None:
        """Keep ``downloaded`` (meant to hash to ``sha256``: :meth:`wheel` checks before it serves) for later
        reads: a hard link where the folders share a file system (no second copy), else a copy. Only the
        newest ``KEEP_WHEELS`` are kept."""
        if not _is_sha256(sha256):
            return
        target = self.root / "blobs" / sha256
        try:
            with atomic_path(target) as tmp:
                try:
                    os.link(downloaded, tmp)
                except OSError:  # another file system, or links refused: a copy
                    shutil.copyfile(downloaded, tmp)
            self._prune_wheels()
        except OSError as e:  # a cache that cannot be written is no reason to fail a download
            log.debug("cannot keep %s in the cache: %s", downloaded.name, e)

    def _prune_wheels(self) -> None:
        kept = sorted(
            (f for f in (self.root / "blobs").iterdir() if not f.name.startswith(TMP_PREFIX)),
            key=lambda f: f.stat().st_mtime,
            reverse=True,
        )
        for stale in kept[KEEP_WHEELS:]:
            stale.unlink(missing_ok=True)

    def derive(self, parent: str, sha: str, writes: Mapping[str, bytes], deletes: Iterable[str]) -> None:
        """Cache commit ``sha``, made by librarian on ``parent``: the parent's cached files, less ``deletes``,
        with ``writes`` over them. An offline read after librarian's own commit then finds that commit's
        index (the parent's was read, whole, to plan the change)."""
        gone = set(deletes) | set(writes)
        base = self.root / "files" / parent
        kept: dict[str, bytes] = {}
        if base.is_dir():
            for f in base.rglob("*"):
                path = f.relative_to(base).as_posix()
                # A killed write's temp file is no file of the commit: never carried into the next one.
                if f.is_file() and path not in gone and not f.name.startswith(TMP_PREFIX):
                    try:
                        kept[path] = f.read_bytes()
                    except OSError:
                        continue
        for path, data in {**kept, **writes}.items():
            self.put(sha, path, data)

    def _prune(self) -> None:
        """Keep the files of the newest ``KEEP_COMMITS`` commits read here, and of every recorded head."""
        heads = set()
        for ref in (self.root / "refs").glob("*"):
            try:
                heads.add(str(json.loads(ref.read_text())["sha"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        commits = sorted((self.root / "files").iterdir(), key=lambda d: d.stat().st_mtime, reverse=True)
        for stale in commits[KEEP_COMMITS:]:
            if stale.name not in heads:
                shutil.rmtree(stale, ignore_errors=True)

    @staticmethod
    def _write(target: Path, data: bytes) -> None:
        atomic_write(target, data)
