"""The Hub store's LFS objects: pre-upload without a commit, which the Hub already holds, which no file
references any more, and permanent deletion (the only way to free their storage on the Hub)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.lfs import UploadInfo, post_lfs_batch_info

from librarian.errors import StoreError
from librarian.stores.base import Blob, Upload

log = logging.getLogger(__name__)

T = TypeVar("T")
REPO_TYPE = "dataset"
_LFS_BATCH = 256  # objects per LFS batch request, as huggingface_hub sends them
_PATHS_INFO_BATCH = 500  # paths per paths-info request
_INLINE_MAX = 1 << 20  # files below this may be kept inline by the Hub: compare them by git blob id


class Reader(Protocol):
    """The store's idempotent read: ``call()`` retried within its policy, its errors translated."""

    def __call__(self, what: str, call: Callable[[], T]) -> T: ...


class LfsObjects:
    """The LFS objects of one dataset repo, read and changed through the store's reader and translation."""

    def __init__(
        self,
        api: HfApi,
        repo_id: str,
        revision: str,
        location: str,
        read: Reader,
        translated: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self.api, self.repo_id, self.revision, self.location = api, repo_id, revision, location
        self.read, self.translated = read, translated

    def upload(self, uploads: Sequence[Upload]) -> None:
        """Send the uploads' files as LFS objects, no commit (huggingface_hub skips those already there)."""
        unique = {u.sha256: u for u in uploads if u.source is not None}
        ops = [
            CommitOperationAdd(path_in_repo=u.path, path_or_fileobj=str(u.source)) for u in unique.values()
        ]
        if ops:
            with self.translated("upload"):
                self.api.preupload_lfs_files(self.repo_id, ops, repo_type=REPO_TYPE, revision=self.revision)

    def missing(self, blobs: Sequence[Blob]) -> tuple[Blob, ...]:
        """Those of ``blobs`` the repo's storage does not hold with that sha256 and size. Paths do not matter.

        The LFS batch API answers this for LFS-backed repos: an object the server holds comes back without
        upload actions. A Xet-backed repo answers in another shape (``"transfer": "xet"``), whose actions say
        nothing of what it holds: then the repo's LFS file listing (sha256 and size) decides instead.
        """
        items = list({b.sha256: b for b in blobs}.values())
        absent: set[str] = set()
        token = self.api.token if isinstance(self.api.token, str) else None
        listed: dict[str, int] | None = None
        for start in range(0, len(items), _LFS_BATCH):
            chunk = items[start : start + _LFS_BATCH]
            infos = [UploadInfo(size=b.size, sample=b"", sha256=bytes.fromhex(b.sha256)) for b in chunk]

            def ask(
                infos: list[UploadInfo] = infos,
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
                return post_lfs_batch_info(
                    infos, token, REPO_TYPE, self.repo_id, quote(self.revision, safe=""), self.api.endpoint
                )

            actions, errors, transfer = self.read("LFS check", ask)
            if transfer in (None, "basic", "multipart"):
                absent |= {str(o.get("oid")) for o in actions if o.get("actions")} | {
                    str(o.get("oid")) for o in errors
                }
                continue
            if listed is None:
                log.info(
                    "%s: the LFS batch API answers in the %r shape; checking the LFS file listing",
                    self.location,
                    transfer,
                )
                listed = self.listed()
            absent |= {b.sha256 for b in chunk if listed.get(b.sha256) != b.size}
        return tuple(b for b in blobs if b.sha256 in absent)

    def listed(self) -> dict[str, int]:
        """Every LFS object the repo stores (pushed, committed or not), sha256 -> size."""
        items = self.read(
            "LFS listing", lambda: list(self.api.list_lfs_files(self.repo_id, repo_type=REPO_TYPE))
        )
        return {str(item.file_oid): int(item.size) for item in items}

    def prove(self, uploads: Sequence[Upload], sha: str) -> None:
        """Raise unless commit ``sha`` holds each upload's path as an LFS file of its sha256 and size (what
        paths-info reports, the same for LFS- and Xet-backed repos): the proof after committing wheels
        uploaded earlier by reference, whose presence no batch answer can promise."""
        wanted = {u.path: u for u in uploads}
        paths = sorted(wanted)
        seen: set[str] = set()
        for start in range(0, len(paths), _PATHS_INFO_BATCH):
            chunk = paths[start : start + _PATHS_INFO_BATCH]

            def ask(chunk: list[str] = chunk) -> list[Any]:
                return list(self.api.get_paths_info(self.repo_id, chunk, repo_type=REPO_TYPE, revision=sha))

            for item in self.read("paths info", ask):
                upload = wanted.get(item.path)
                if upload is None:
                    continue
                seen.add(item.path)
                lfs = getattr(item, "lfs", None)
                held = (lfs.sha256, lfs.size) if lfs is not None else (None, getattr(item, "size", None))
                if held != (upload.sha256, upload.size):
                    raise StoreError(
                        f"{self.location}/{item.path}: after commit {sha[:12]} the Hub reports "
                        f"sha256 {held[0]}, {held[1]} bytes, not the staged {upload.sha256[:12]}…, "
                        f"{upload.size} bytes; run 'librarian verify'"
                    )
        for path in paths:
            if path not in seen:
                raise StoreError(
                    f"{self.location}/{path}: not in commit {sha[:12]} after committing it; run 'librarian verify'"
                )

    def unreferenced(
        self, referenced: set[str], grace: float, now: datetime | None = None
    ) -> tuple[Blob, ...]:
        """The repo's LFS objects that are not in ``referenced`` (sha256s) and were pushed more than ``grace``
        seconds ago (uploads staged for a reindex yet to come are younger), by a path that names each."""
        cutoff = (now or datetime.now(timezone.utc)) - timedelta(seconds=grace)

        def listing() -> list[Any]:
            return list(self.api.list_lfs_files(self.repo_id, repo_type=REPO_TYPE))

        found: dict[str, Blob] = {}
        for item in self.read("LFS listing", listing):
            sha = str(item.file_oid)
            pushed = item.pushed_at if item.pushed_at.tzinfo else item.pushed_at.replace(tzinfo=timezone.utc)
            if sha not in referenced and item.oid not in referenced and pushed <= cutoff:
                found.setdefault(sha, Blob(sha, int(item.size), str(item.filename)))
        return tuple(sorted(found.values(), key=lambda b: b.name))

    def purge(self, blobs: Sequence[Blob]) -> None:
        """Permanently delete the LFS objects ``blobs`` name, keeping the history as it is.

        ``rewrite_history=False`` on purpose: rewriting drops the pointers but gives every commit from the
        first one that held them a new id, and commit ids are what librarian pins (``pull --requirements``
        URLs, the read cache, the commit links it prints). Kept, a commit's pointer to a purged object answers
        404, which is all that is lost: the object itself.
        """
        if not blobs:
            return
        wanted = {b.sha256 for b in blobs}
        items = [
            item
            for item in self.read(
                "LFS listing", lambda: list(self.api.list_lfs_files(self.repo_id, repo_type=REPO_TYPE))
            )
            if item.file_oid in wanted
        ]
        with self.translated("LFS deletion"):
            self.api.permanently_delete_lfs_files(
                self.repo_id, items, repo_type=REPO_TYPE, rewrite_history=False
            )

    def not_there_yet(self, adds: list[Any], uploads: Sequence[Upload], parent: str) -> list[Any]:
        """The adds whose path at ``parent`` does not already hold the same bytes (an earlier piece landed)."""
        by_path = {u.path: u.sha256 for u in uploads}
        # Small files (PEP 658 METADATA) are stored inline, named by their git blob id, not an LFS sha256.
        git_ids = {
            u.path: git_blob_id(u.source) for u in uploads if u.source is not None and u.size < _INLINE_MAX
        }
        there: set[str] = set()
        paths = sorted(by_path)
        for start in range(0, len(paths), _PATHS_INFO_BATCH):
            chunk = paths[start : start + _PATHS_INFO_BATCH]

            def ask(chunk: list[str] = chunk) -> list[Any]:
                return list(
                    self.api.get_paths_info(self.repo_id, chunk, repo_type=REPO_TYPE, revision=parent)
                )

            for item in self.read("paths info", ask):
                lfs = getattr(item, "lfs", None)
                held = lfs.sha256 if lfs is not None else getattr(item, "blob_id", None)
                wanted = by_path.get(item.path) if lfs is not None else git_ids.get(item.path)
                if held is not None and held == wanted:
                    there.add(item.path)
        if there:
            log.info(
                "%s: %d wheel(s) already there from an earlier piece; not sent again",
                self.location,
                len(there),
            )
        return [op for op in adds if op.path_in_repo not in there]


def add_operation(upload: Upload) -> CommitOperationAdd:
    """The commit operation for an upload: a local file, or a blob already pre-uploaded (``source`` None)."""
    if upload.source is not None:
        return CommitOperationAdd(path_in_repo=upload.path, path_or_fileobj=str(upload.source))
    # No public constructor names an LFS object already on the Hub: mark it uploaded, as
    # preupload_lfs_files itself does, so that create_commit only writes its pointer.
    op = CommitOperationAdd(path_in_repo=upload.path, path_or_fileobj=b"")
    op.upload_info = UploadInfo(size=upload.size, sample=b"", sha256=bytes.fromhex(upload.sha256))
    op._upload_mode = "lfs"
    op._is_uploaded = True
    return op


def git_blob_id(path: Path) -> str:
    """The id git (and the Hub, for a file kept inline) gives these bytes: sha1 of ``blob <size>\\0`` + bytes."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
