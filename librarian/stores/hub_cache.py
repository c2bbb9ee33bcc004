"""The Hub store's read cache on this machine: small files (index, shards) by commit, and the newest head seen
of each revision, so that ``HF_HUB_OFFLINE=1`` (or a Hub that stays unreachable) reads a known commit."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from urllib.parse import quote

from huggingface_hub import constants

from librarian.safeio import atomic_write

log = logging.getLogger(__name__)

KEEP_COMMITS = 8  # commits whose index files the cache keeps (besides each revision's newest head)


class ReadCache:
    """Small files of this repo by commit, and the newest head seen of each revision, on this machine."""

    def __init__(self, repo_id: str) -> None:
        base = os.environ.get("LIBRARIAN_CACHE") or os.path.join(constants.HF_HOME, "librarian")
        self.root = Path(base) / "hub" / f"datasets--{repo_id.replace('/', '--')}"

    def _ref(self, revision: str) -> Path:
        return self.root / "refs" / quote(revision, safe="")

    def head(self, revision: str) -> str | None:
        """The newest commit of ``revision`` seen here (by commit date, not file time)."""
        try:
            return str(json.loads(self._ref(revision).read_text())["sha"])
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
