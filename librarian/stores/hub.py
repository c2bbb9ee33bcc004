"""The Hugging Face dataset store, ``hf://datasets/<owner>/<name>[@<revision>]``.

The only module that imports ``huggingface_hub``. Endpoint (HF_ENDPOINT) and token (HF_TOKEN,
``hf auth login``) are the client's own; the token is never printed, logged or put in a message.

Every change is one ``create_commit`` with ``parent_commit`` set to the revision the plan was made
from. On a conflict (412) the index is read again, the plan made again, and the commit retried with
backoff. The commit POST is not retried by the client; when its answer is lost, the history is read
for the commit's marker before trying again, so a change never lands twice.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    get_session,
    hf_hub_download,
    scan_cache_dir,
    try_to_load_from_cache,
)
from huggingface_hub.errors import (
    CacheNotFound,
    EntryNotFoundError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils.tqdm import disable_progress_bars

from librarian.catalogue import render_card, render_catalogue
from librarian.errors import BadInput, LibrarianError, StoreError
from librarian.index import ROOT, Index
from librarian.layout import Layout
from librarian.stores.base import Applied, Changes, Listing, Planner, StoredFile, Upload, read_index

log = logging.getLogger(__name__)

_URL = re.compile(r"hf://datasets/(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?:@(?P<rev>[^\s]+))?/?")
REPO_TYPE = "dataset"
MARKER = "librarian-change-id"
CARD = "README.md"
MAX_ATTEMPTS = int(os.environ.get("LIBRARIAN_HUB_ATTEMPTS", "12"))
_TIMEOUT = float(os.environ.get("LIBRARIAN_HUB_TIMEOUT", "60"))


def _use_timeouts() -> None:
    # The client's default has no timeout at all for API calls (hub-api.md §1): a hung server would hang
    # us. Give the shared session one, unless someone (a test, the user's own factory) already did.
    session = get_session()
    if session.timeout.read is None:
        session.timeout = httpx2.Timeout(_TIMEOUT, connect=min(_TIMEOUT, 15.0))


class HubStore:
    """A dataset repo on the Hugging Face Hub (or any server speaking its API, via HF_ENDPOINT)."""

    def __init__(self, repo_id: str, revision: str = "main", *, create: bool = False, api: HfApi | None = None) -> None:
        _use_timeouts()
        if not sys.stderr.isatty():
            disable_progress_bars()  # progress bars for people at a terminal; no \r-spam in CI logs
        self.repo_id = repo_id
        self.revision = revision
        self.create = create
        self.api = api or HfApi()
        self._sha: str | None = None  # the commit every read of this run is pinned to

    @classmethod
    def from_url(cls, url: str, *, create: bool = False) -> HubStore:
        """Parse ``hf://datasets/owner/name[@revision]``."""
        m = _URL.fullmatch(url.strip())
        if m is None:
            raise BadInput(f"{url}: not a Hub dataset repo (expected hf://datasets/OWNER/NAME[@REVISION])")
        return cls(m["repo"], m["rev"] or "main", create=create)

    @property
    def location(self) -> str:
        """``hf://datasets/owner/name`` (with ``@revision`` when not main)."""
        rev = "" if self.revision == "main" else f"@{self.revision}"
        return f"hf://datasets/{self.repo_id}{rev}"

    # --- reading, pinned to one commit ------------------------------------------------------------

    def _head(self) -> str | None:
        """The revision's commit sha, or ``None`` when the repo does not exist yet."""
        try:
            with self._translated("repo info"):
                info = self.api.repo_info(self.repo_id, repo_type=REPO_TYPE, revision=self.revision)
        except _NoRepo:
            return None
        return str(info.sha)

    def _pinned(self) -> str | None:
        if self._sha is None:
            try:
                self._sha = self._head()
            except _Unreachable:
                self._sha = self._cached_head()
        return self._sha

    def _cached_head(self) -> str:
        """When the Hub cannot be reached, the commit of the client's cached ``index.json``, said plainly.

        huggingface_hub itself falls back to its cache silently; a cache of wheels must not, since the
        copy may be stale. Writes never come here: they need the live head for ``parent_commit``.
        """
        # Reads are pinned to commit shas, which leave no refs/<branch> behind: take the newest cached
        # snapshot that holds an index (a pinned sha is what the branch pointed at when it was read).
        cached = try_to_load_from_cache(
            self.repo_id, ROOT, cache_dir=constants.HF_HUB_CACHE, revision=self.revision, repo_type=REPO_TYPE
        )
        sha = Path(cached).parent.name if isinstance(cached, str) else self._newest_cached_snapshot()
        if sha is None:
            raise StoreError(f"{self.location}: cannot reach the Hub, and nothing of this repo is cached here")
        log.warning(
            "%s: cannot reach the Hub; using the cached index of commit %s (it may be stale)", self.location, sha[:12]
        )
        return sha

    def _newest_cached_snapshot(self) -> str | None:
        try:
            cache = scan_cache_dir(constants.HF_HUB_CACHE)  # read now: the function's default is import-time
        except CacheNotFound:
            return None
        snapshots = [
            rev
            for repo in cache.repos
            if repo.repo_id == self.repo_id and repo.repo_type == REPO_TYPE
            for rev in repo.revisions
            if any(f.file_name == ROOT and str(f.file_path.parent) == str(rev.snapshot_path) for f in rev.files)
        ]
        if not snapshots:
            return None
        return max(snapshots, key=lambda rev: rev.last_modified).commit_hash

    def _missing_repo(self) -> StoreError:
        return StoreError(f"{self.location}: no such dataset repo (publish --create makes it)")

    def read_file(self, path: str) -> bytes | None:
        """A small file's bytes at the pinned commit, or ``None``."""
        sha = self._pinned()
        if sha is None:
            return None
        try:
            with self._translated(path):
                local = hf_hub_download(self.repo_id, path, repo_type=REPO_TYPE, revision=sha, endpoint=self.api.endpoint)
        except _NoEntry:
            return None
        return Path(local).read_bytes()

    def list_files(self) -> Listing:
        """The whole tree at the pinned commit; LFS files come with their sha256."""
        sha = self._pinned()
        if sha is None:
            raise self._missing_repo()
        files = []
        with self._translated("tree listing"):
            for item in self.api.list_repo_tree(self.repo_id, recursive=True, repo_type=REPO_TYPE, revision=sha):
                if isinstance(item, RepoFile):
                    files.append(StoredFile(item.path, item.size, item.lfs.sha256 if item.lfs else None))
        return Listing(tuple(sorted(files, key=lambda f: f.path)))

    def fetch(self, path: str, dest: Path) -> Path:
        """Download through the client's cache, then copy to ``dest`` via a temp file."""
        sha = self._pinned()
        if sha is None:
            raise self._missing_repo()
        try:
            with self._translated(path):
                local = hf_hub_download(self.repo_id, path, repo_type=REPO_TYPE, revision=sha, endpoint=self.api.endpoint)
        except _NoEntry as e:
            raise StoreError(f"{self.location}/{path}: not in the repo") from e
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".librarian-tmp-", dir=dest.parent)
        os.close(fd)
        try:
            shutil.copyfile(local, tmp)
            os.replace(tmp, dest)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return dest

    def local_path(self, path: str) -> Path | None:
        """Hub files are never local."""
        return None

    # --- writing: one commit per change ---------------------------------------------------------

    def update(self, plan: Planner, default_layout: Layout) -> Applied:
        """Plan against the head, commit with ``parent_commit``; on conflict re-plan and retry."""
        change_id = uuid.uuid4().hex
        notes: list[str] = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            self._sha = parent = self._head()  # the live head, never a cached one: it becomes parent_commit
            if parent is None:
                parent = self._create_repo()
            old = read_index(self, default_layout)
            changes = plan(old)
            if changes.empty and changes.index == old:
                return Applied(changes, self.location, attempt, tuple(notes))
            operations = self._operations(old, changes)
            description = f"{MARKER}: {change_id}"
            try:
                with self._translated("commit", conflicts=True):
                    info = self.api.create_commit(
                        self.repo_id, operations, commit_message=changes.message, commit_description=description,
                        repo_type=REPO_TYPE, revision=self.revision, parent_commit=parent,
                    )
                return Applied(changes, str(info.commit_url), attempt, tuple(notes))
            except _Conflict:
                notes.append(f"attempt {attempt}: the repo moved on since {parent[:8]}; planning again")
            except _Transient as e:
                if self._landed(change_id):
                    return Applied(changes, self.location, attempt, (*notes, "the commit's answer was lost; found it in the history"))
                notes.append(f"attempt {attempt}: {e}")
            log.info("%s", notes[-1])
            _backoff(attempt)
        raise StoreError(f"{self.location}: could not commit after {MAX_ATTEMPTS} attempts ({notes[-1] if notes else ''})")

    def stage(self, uploads: Sequence[Upload], files: Mapping[str, bytes], message: str) -> str:
        """One commit of adds only, without ``parent_commit``: it holds no index file, so it fits any head."""
        change_id = uuid.uuid4().hex
        notes: list[str] = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            self._sha = self._head()
            if self._sha is None:
                self._create_repo()
            operations: list[Any] = [
                CommitOperationAdd(path_in_repo=u.path, path_or_fileobj=str(u.source))
                for u in sorted(uploads, key=lambda u: u.path)
            ]
            operations += [CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in sorted(files.items())]
            try:
                with self._translated("commit", conflicts=True):
                    info = self.api.create_commit(
                        self.repo_id, operations, commit_message=message, commit_description=f"{MARKER}: {change_id}",
                        repo_type=REPO_TYPE, revision=self.revision,
                    )
                return str(info.commit_url)
            except _Conflict:
                # No parent was sent, but a busy server may still refuse a racing commit; adds replay safely.
                notes.append(f"attempt {attempt}: the server refused a racing commit; trying again")
            except _Transient as e:
                if self._landed(change_id):
                    return self.location
                notes.append(f"attempt {attempt}: {e}")
            log.info("%s", notes[-1])
            _backoff(attempt)
        raise StoreError(f"{self.location}: could not commit after {MAX_ATTEMPTS} attempts ({notes[-1] if notes else ''})")

    def _operations(self, old: Index, changes: Changes) -> list[Any]:
        ops: list[Any] = []
        uploaded: set[str] = set()
        for upload in sorted(changes.uploads, key=lambda u: u.path):
            ops.append(CommitOperationAdd(path_in_repo=upload.path, path_or_fileobj=str(upload.source)))
            uploaded.add(upload.path)
        for path in changes.deletes:
            if path not in uploaded:
                ops.append(CommitOperationDelete(path_in_repo=path))
        before, after = self._catalogue(old), self._catalogue(changes.index)
        for path, data in sorted(after.items()):
            if before.get(path) != data:
                ops.append(CommitOperationAdd(path_in_repo=path, path_or_fileobj=data))
        for path in sorted(set(before) - set(after)):
            ops.append(CommitOperationDelete(path_in_repo=path))
        return ops

    def _catalogue(self, index: Index) -> dict[str, bytes]:
        # The Hub store also keeps a dataset card, for people who find the repo on the Hub.
        files = render_catalogue(index)
        if index.entries:
            files[CARD] = render_card(index, self.repo_id, self.api.endpoint)
        return files

    def _landed(self, change_id: str) -> bool:
        """Whether a commit carrying ``change_id`` is in the history (its answer may have been lost)."""
        try:
            with self._translated("commit history"):
                commits = self.api.list_repo_commits(self.repo_id, repo_type=REPO_TYPE, revision=self.revision)
        except LibrarianError:
            return False
        return any(change_id in (c.message or "") for c in commits[:200])

    def _create_repo(self) -> str:
        if not self.create:
            raise self._missing_repo()
        with self._translated("create repo"):
            self.api.create_repo(self.repo_id, repo_type=REPO_TYPE, exist_ok=True)
        head = self._head()
        if head is None:
            raise StoreError(f"{self.location}: created, but the repo is still not there")
        self._sha = head
        return head

    @contextmanager
    def _translated(self, what: str, conflicts: bool = False) -> Iterator[None]:
        """Turn the client's errors into ours: one line, the store and the problem, never the token."""
        try:
            yield
        except RepositoryNotFoundError as e:
            raise _NoRepo(f"{self.location}: no such dataset repo (publish --create makes it)") from e
        except RevisionNotFoundError as e:
            raise StoreError(f"{self.location}: no revision {self.revision!r}") from e
        except EntryNotFoundError as e:
            if isinstance(e, LocalEntryNotFoundError):
                raise StoreError(f"{self.location}/{what}: cannot reach the Hub and no cached copy ({_short(e)})") from e
            raise _NoEntry(f"{self.location}/{what}: no such file") from e
        except OfflineModeIsEnabled as e:
            raise _Unreachable(f"{self.location}: HF_HUB_OFFLINE is set; {what} needs the network") from e
        except HfHubHTTPError as e:
            status = e.response.status_code if e.response is not None else None
            if conflicts and status == 412:
                raise _Conflict(f"{self.location}: the repo moved on") from e
            if conflicts and status is not None and (status >= 500 or status == 429):
                raise _Transient(f"{what}: HTTP {status}") from e
            if status in (401, 403):
                raise StoreError(f"{self.location}: {what}: not allowed (HTTP {status}); check HF_TOKEN or `hf auth login`") from e
            raise StoreError(f"{self.location}: {what}: HTTP {status} {_short(e)}") from e
        except RuntimeError as e:
            # huggingface_hub wraps a failed LFS upload: RuntimeError("Error while uploading ...") from the cause.
            cause = e.__cause__
            if not isinstance(cause, (HfHubHTTPError, httpx2.TransportError, OSError)):
                raise
            if conflicts:
                raise _Transient(f"{what}: upload failed ({type(cause).__name__})") from e
            raise StoreError(f"{self.location}: {what}: upload failed ({_short(cause)})") from e
        except (httpx2.TransportError, ConnectionError, TimeoutError) as e:
            if conflicts:
                raise _Transient(f"{what}: {type(e).__name__}") from e
            raise _Unreachable(f"{self.location}: {what}: cannot reach the Hub ({type(e).__name__})") from e


class _NoRepo(StoreError):
    pass


class _NoEntry(StoreError):
    pass


class _Conflict(StoreError):
    pass


class _Transient(StoreError):
    pass


class _Unreachable(StoreError):
    pass


def _backoff(attempt: int) -> None:
    # Exponential with jitter, so that racing publishers spread out instead of colliding again in step.
    time.sleep(min(8.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random()))


def _short(e: Exception) -> str:
    server = getattr(e, "server_message", None)
    text = server or str(e).splitlines()[0] if str(e) else type(e).__name__
    return " ".join(str(text).split())[:200]
