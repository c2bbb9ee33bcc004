"""The Hugging Face dataset store: ``hf://datasets/<owner>/<name>[@<revision>]``, or the repo's web URL.

With ``hub_http``, the only modules that import ``huggingface_hub``. Endpoint (HF_ENDPOINT) and token
(HF_TOKEN, ``hf auth login``) are the client's own; the token is never printed, logged or put in a message.

Reads are pinned to one commit (the revision's head when the run starts) and go through ``hub_http``:
time-outs on every call, retries of 408/429/5xx/time-outs within a bounded count and time. Files are
fetched with plain GETs of ``resolve/<commit>/<path>``: a wheel lands only in the caller's directory (no
second copy in the HF cache); small files (index, shards) are kept by commit under
``$HF_HOME/librarian`` with the newest head seen of each revision, so that with ``HF_HUB_OFFLINE=1``, or
when the Hub stays unreachable after the retries, the newest commit's index is used, and said.

Every change is one ``create_commit`` with ``parent_commit`` set to the revision the plan was made
from. On a conflict (412) the index is read again, the plan made again, and the commit retried with
backoff. The commit POST is not retried by the client; when its answer is lost, the history is read
for the commit's marker before trying again, so a change never lands twice.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import quote

import httpx2
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    get_session,
    get_token,
    hf_hub_url,
    hf_raise_for_status,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.lfs import UploadInfo, post_lfs_batch_info
from huggingface_hub.utils import logging as hf_logging
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils.tqdm import disable_progress_bars

from librarian import progress
from librarian.catalogue import CARD, is_generated
from librarian.errors import BadInput, LibrarianError, StoreError, Unreachable
from librarian.generated import CardSource, plan_generated
from librarian.index import Index, parse_pending_path
from librarian.layout import Layout, check_store_path
from librarian.redact import clean, register_secret
from librarian.stores.base import Applied, Blob, Changes, Listing, Planner, R, StoredFile, Upload, read_index
from librarian.stores.hub_address import parse_hub_address, public_endpoint
from librarian.stores.hub_cache import ReadCache
from librarian.stores.hub_http import (
    RETRY_STATUS,
    NetPolicy,
    bound_session,
    describe,
    rate_limit_wait,
    retrying,
    server_words,
)
from librarian.stores.pieces import plan_pieces

log = logging.getLogger(__name__)

T = TypeVar("T")
REPO_TYPE = "dataset"
MARKER = "librarian-change-id"
MAX_ATTEMPTS = int(os.environ.get("LIBRARIAN_HUB_ATTEMPTS", "12"))
_CHUNK = 1 << 20
_LFS_BATCH = 256  # objects per LFS batch request, as huggingface_hub sends them
_PATHS_INFO_BATCH = 500  # paths per paths-info request


def _offline() -> bool:
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}


class HubStore:
    """A dataset repo on the Hugging Face Hub (or any server speaking its API, via HF_ENDPOINT)."""

    def __init__(
        self,
        repo_id: str,
        revision: str = "main",
        *,
        create: bool = False,
        api: HfApi | None = None,
        license: str | None = None,
        policy: NetPolicy | None = None,
    ) -> None:
        self.policy = policy or NetPolicy.from_env()
        bound_session(self.policy)
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # the client's retry chatter would break the one-line stderr promise
        # huggingface_hub's own bars drew as blank lines under librarian's stderr handling; librarian's
        # bars (librarian.progress, drawn by the CLI on a terminal only) show downloads and commits instead.
        disable_progress_bars()
        self.repo_id = repo_id
        self.revision = revision
        self.create = create
        self.license = license
        self.api = api or HfApi()
        token = self.api.token if isinstance(self.api.token, str) else get_token()
        register_secret(token)
        self._cache = ReadCache(repo_id)
        self._sha: str | None = None  # the commit every read of this run is pinned to

    @classmethod
    def from_url(cls, url: str, *, create: bool = False, license: str | None = None) -> HubStore:
        """A store for ``hf://datasets/owner/name[@revision]`` or the repo's web URL."""
        parsed = parse_hub_address(url)
        if parsed is None:
            raise BadInput(f"{url}: not a Hub dataset repo (expected hf://datasets/OWNER/NAME[@REVISION])")
        return cls(parsed[0], parsed[1], create=create, license=license)

    @property
    def location(self) -> str:
        """``hf://datasets/owner/name`` (with ``@revision`` when not main)."""
        rev = "" if self.revision == "main" else f"@{self.revision}"
        return f"hf://datasets/{self.repo_id}{rev}"

    def commit_url(self, sha: str) -> str:
        """The web page of a commit."""
        return f"{public_endpoint(self.api.endpoint)}/datasets/{self.repo_id}/commit/{sha}"

    # --- reading, pinned to one commit ------------------------------------------------------------

    def _read(self, what: str, call: Callable[[], T]) -> T:
        """An idempotent read: retried within the policy, its errors translated."""
        with self._translated(what):
            return retrying(f"{self.location}: {what}", call, self.policy)

    def _head(self) -> str | None:
        """The revision's commit sha, or ``None`` when the repo does not exist yet."""
        try:
            info = self._read("repo info", lambda: self.api.repo_info(self.repo_id, repo_type=REPO_TYPE, revision=self.revision))
        except _NoRepo:
            return None
        sha = str(info.sha)
        modified = getattr(info, "last_modified", None)
        self._cache.remember_head(self.revision, sha, modified.isoformat() if isinstance(modified, datetime) else "")
        return sha

    def _pinned(self) -> str | None:
        """The commit reads are pinned to; ``None`` for a repo that ``publish --create`` is about to make."""
        if self._sha is None:
            if _offline():
                self._sha = self._cached_head("HF_HUB_OFFLINE is set")
            else:
                try:
                    head = self._head()
                except _Unreachable as e:
                    head = self._cached_head(e.reason)
                if head is None:
                    if self.create:
                        return None
                    raise self._missing_repo()
                self._sha = head
        return self._sha

    def _cached_head(self, why: str) -> str:
        """The newest commit of the revision seen on this machine, said plainly (its index may be stale).

        Writes never come here: they need the live head for ``parent_commit``.
        """
        sha = self._cache.head(self.revision)
        if sha is None:
            raise _Unreachable(f"{self.location}: {why}, and nothing of this repo is cached here", why)
        log.warning("%s: %s; using the cached index of commit %s (it may be stale)", self.location, why, sha[:12])
        return sha

    def _missing_repo(self) -> StoreError:
        return _NoRepo(f"{self.location}: no such dataset repo (publish --create makes it)")

    def _get(self, sha: str, path: str, sink: Callable[[Iterator[bytes]], None],
             sized: Callable[[int | None], None] | None = None) -> None:
        """GET the file at ``sha`` into ``sink`` (called again from scratch on a retry); ``sized`` gets its length."""
        url = hf_hub_url(self.repo_id, path, repo_type=REPO_TYPE, revision=sha, endpoint=self.api.endpoint)
        headers = build_hf_headers(token=self.api.token, library_name="librarian")

        def attempt() -> None:
            with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
                hf_raise_for_status(response)
                if sized is not None:
                    length = response.headers.get("content-length", "")
                    sized(int(length) if length.isdigit() else None)
                sink(response.iter_bytes(_CHUNK))

        self._read(path, attempt)

    def read_file(self, path: str) -> bytes | None:
        """A small file's bytes at the pinned commit, or ``None``."""
        # A path with ``..`` would be normalised by the HTTP client into another file, even another revision.
        check_store_path(path)
        sha = self._pinned()
        if sha is None:
            return None
        cached = self._cache.get(sha, path)
        if cached is not None:
            return cached
        if _offline():
            raise _Unreachable(f"{self.location}/{path}: HF_HUB_OFFLINE is set and commit {sha[:12]} of it is not cached here", "offline")
        chunks: list[bytes] = []

        def sink(stream: Iterator[bytes]) -> None:
            chunks.clear()
            chunks.extend(stream)

        try:
            self._get(sha, path, sink)
        except _NoEntry:
            return None
        data = b"".join(chunks)
        self._cache.put(sha, path, data)
        return data

    def list_files(self) -> Listing:
        """The whole tree at the pinned commit; LFS files come with their sha256."""
        sha = self._pinned()
        if sha is None:
            return Listing(())

        def listing() -> list[StoredFile]:
            return [
                StoredFile(item.path, item.size, item.lfs.sha256 if item.lfs else None)
                for item in self.api.list_repo_tree(self.repo_id, recursive=True, repo_type=REPO_TYPE, revision=sha)
                if isinstance(item, RepoFile)
            ]

        return Listing(tuple(sorted(self._read("tree listing", listing), key=lambda f: f.path)))

    def fetch(self, path: str, dest: Path) -> Path:
        """Stream the file straight to ``dest`` (temp file, then rename): one copy, none in the HF cache."""
        check_store_path(path)
        sha = self._pinned()
        if sha is None:
            raise self._missing_repo()
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".librarian-tmp-", dir=dest.parent)
        os.close(fd)

        size: list[int | None] = [None]

        def sink(stream: Iterator[bytes]) -> None:
            with open(tmp, "wb") as out, progress.task(f"download {PurePosixPath(path).name}", size[0]) as bar:
                for chunk in stream:
                    out.write(chunk)
                    bar.advance(len(chunk))

        try:
            try:
                self._get(sha, path, sink, sized=lambda n: size.__setitem__(0, n))
            except _NoEntry as e:
                raise StoreError(f"{self.location}/{path}: not in the repo") from e
            os.replace(tmp, dest)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return dest

    def local_path(self, path: str) -> Path | None:
        """Hub files are never local."""
        return None

    def url_for(self, path: str) -> str:
        """The file's ``resolve`` URL at the commit this run reads (not the branch, which moves)."""
        check_store_path(path)
        sha = self._pinned()
        if sha is None:
            raise self._missing_repo()
        base = public_endpoint(self.api.endpoint)
        return f"{base}/datasets/{self.repo_id}/resolve/{sha}/{quote(path)}"

    # --- freeing storage ----------------------------------------------------------------------

    def purgeable(self, sha256s: Iterable[str], leaving: Iterable[str] = ()) -> tuple[Blob, ...]:
        """LFS objects among ``sha256s`` that no file at the live head references, ``leaving`` paths aside."""
        wanted = set(sha256s)
        if not wanted:
            return ()
        self._sha = self._head()
        if self._sha is None:
            raise self._missing_repo()
        gone = set(leaving)
        referenced = {f.sha256 for f in self.list_files().files if f.path not in gone}

        def listing() -> list[Any]:
            return list(self.api.list_lfs_files(self.repo_id, repo_type=REPO_TYPE))

        found: dict[str, Blob] = {}
        for item in self._read("LFS listing", listing):
            sha = next((x for x in (item.oid, item.file_oid) if x in wanted), None)
            if sha is not None and sha not in referenced:
                found.setdefault(sha, Blob(str(item.file_oid), int(item.size), str(item.filename)))
        return tuple(sorted(found.values(), key=lambda b: b.name))

    def purge(self, blobs: Sequence[Blob]) -> None:
        """Permanently delete the LFS objects ``blobs`` name, rewriting history to drop their pointers."""
        if not blobs:
            return
        items = [item for item in self._read("LFS listing", lambda: list(self.api.list_lfs_files(self.repo_id, repo_type=REPO_TYPE)))
                 if item.file_oid in {b.sha256 for b in blobs}]
        with self._translated("LFS deletion"):
            self.api.permanently_delete_lfs_files(self.repo_id, items, repo_type=REPO_TYPE)

    # --- writing: one commit per change, in pieces when it is big ----------------------------------

    def update(self, plan: Planner[R], default_layout: Layout) -> Applied[R]:
        """Plan against the head, commit with ``parent_commit``; on conflict re-plan and retry.

        A change of more than ``policy.commit_ops`` files is committed in pieces, wheels first and the
        index last, each piece's parent the one before (see :meth:`_commit_pieces`).
        """

        def step(attempt: int, notes: list[str]) -> Applied[R]:
            self._sha = parent = self._head()  # the live head, never a cached one: it becomes parent_commit
            if parent is None:
                self._sha = parent = self._create_repo()
            old = read_index(self, default_layout)
            changes, result = plan(old)
            if changes.empty and changes.index == old and not changes.rebuild:
                return Applied(changes, result, self.location, attempt, tuple(notes))
            urls = self._commit_pieces(old, changes, parent, notes)
            self._note_new_head()
            return Applied(changes, result, urls[-1], attempt, tuple(notes), commit=urls[-1])

        return self._attempts(step)

    def stage(self, uploads: Sequence[Upload], files: Mapping[str, bytes], message: str) -> str:
        """One commit of adds only, without ``parent_commit``: it holds no index file, so it fits any head."""

        def step(attempt: int, notes: list[str]) -> str:
            self._sha = self._head()
            if self._sha is None:
                self._create_repo()
            operations: list[Any] = [self._add(u) for u in sorted(uploads, key=lambda u: u.path)]
            operations += [CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in sorted(files.items())]
            return self._commit_once(operations, message, None)

        return self._attempts(step)

    def stage_blobs(self, uploads: Sequence[Upload]) -> str:
        """Upload the wheels' bytes as LFS objects without a commit (huggingface_hub's pre-upload).

        Returns the head the caller planned against. Blobs already on the Hub are not sent again.
        """
        head = self._head() or self._create_repo()
        unique = {u.sha256: u for u in uploads if u.source is not None}
        ops = [CommitOperationAdd(path_in_repo=u.path, path_or_fileobj=str(u.source)) for u in unique.values()]
        if ops:
            with self._translated("upload"):
                self.api.preupload_lfs_files(self.repo_id, ops, repo_type=REPO_TYPE, revision=self.revision)
        missing = self.missing_blobs([Blob(u.sha256, u.size, u.path) for u in unique.values()])
        if missing:
            raise StoreError(f"{self.location}/{missing[0].name}: the Hub did not keep it as an LFS object "
                             "(it stores the file inline); publish it without --manifest")  # fmt: skip
        return head

    def missing_blobs(self, blobs: Sequence[Blob]) -> tuple[Blob, ...]:
        """Those of ``blobs`` the repo's LFS storage does not hold with that sha256 and size (the LFS batch
        API: an object the server already has comes back without upload actions). Paths do not matter."""
        items = list({b.sha256: b for b in blobs}.values())
        absent: set[str] = set()
        for start in range(0, len(items), _LFS_BATCH):
            chunk = items[start : start + _LFS_BATCH]
            infos = [UploadInfo(size=b.size, sample=b"", sha256=bytes.fromhex(b.sha256)) for b in chunk]

            def ask(infos: list[UploadInfo] = infos) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
                return post_lfs_batch_info(infos, self.api.token if isinstance(self.api.token, str) else None,
                                           REPO_TYPE, self.repo_id, quote(self.revision, safe=""), self.api.endpoint)  # fmt: skip

            actions, errors, _ = self._read("LFS check", ask)
            absent |= {str(o.get("oid")) for o in actions if o.get("actions")} | {str(o.get("oid")) for o in errors}
        return tuple(b for b in blobs if b.sha256 in absent)

    def _attempts(self, step: Callable[[int, list[str]], T]) -> T:
        """The one commit loop: ``step`` again on a conflict (re-plan), a transient failure (backoff) or a
        short rate limit (its wait); a long rate limit ends the command at once (exit 3)."""
        notes: list[str] = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return step(attempt, notes)
            except _Conflict:
                notes.append(f"attempt {attempt}: the repo moved on; planning again")
                wait = _backoff_wait(attempt)
            except _Transient as e:
                notes.append(f"attempt {attempt}: {e}")
                wait = _backoff_wait(attempt)
            except _RateLimited as e:
                if not e.commits:
                    raise
                if e.wait is None or e.wait > self.policy.max_wait:
                    raise self._rate_limited(e) from e
                notes.append(f"attempt {attempt}: the Hub limits commits; waiting {_say_wait(e.wait)} as it asks")
                wait = e.wait + random.random()
            log.info("%s", notes[-1])
            time.sleep(wait)
        raise Unreachable(f"{self.location}: could not commit after {MAX_ATTEMPTS} attempts ({notes[-1] if notes else ''})")

    def _rate_limited(self, e: _RateLimited) -> Unreachable:
        when = f"retry in {_say_wait(e.wait)}" if e.wait is not None else "retry later"
        words = f" ({clean(e.words, 160)})" if e.words else ""
        return Unreachable(
            f"{self.location}: the Hub refuses more commits to this repo for now{words}; {when}, or publish a build "
            "matrix on the fan-in path: 'publish --stage --manifest FILE' per job (no commit), one 'reindex --manifest' "
            "(uploaded wheels stay on the Hub and are not sent again)"
        )

    def _commit_once(self, operations: list[Any], message: str, parent: str | None) -> str:
        """One ``create_commit`` carrying a marker; a lost answer is looked up in the history. Returns its URL."""
        change_id = uuid.uuid4().hex
        try:
            bar = progress.task(f"commit {len(operations)} file(s)", unit="files")
            with self._translated("commit", conflicts=True), bar:
                info = self.api.create_commit(
                    self.repo_id, operations, commit_message=message, commit_description=f"{MARKER}: {change_id}",
                    repo_type=REPO_TYPE, revision=self.revision, parent_commit=parent,
                )
        except _Transient:
            landed = self._landed(change_id)
            if landed is None:
                raise
            log.info("%s: the commit's answer was lost; found it in the history", self.location)
            return landed
        return self.commit_url(str(info.oid))

    def _commit_pieces(self, old: Index, changes: Changes, parent: str, notes: list[str]) -> list[str]:
        """Commit ``changes`` in pieces of at most ``policy.commit_ops`` files: wheels first, then the index
        (with as many deletions as fit), then the remaining deletions. The index never names a file that
        is not there: a failure between pieces leaves only files the index does not list yet, which the
        next publish (it skips wheels already there) or ``reindex --adopt`` picks up."""
        cap = self.policy.commit_ops
        adds = [self._add(u) for u in sorted(changes.uploads, key=lambda u: u.path)]
        uploaded = {u.path for u in changes.uploads}
        deletes = [CommitOperationDelete(path_in_repo=p) for p in changes.deletes if p not in uploaded]
        catalogue = self._catalogue_ops(old, changes)
        if len(adds) + len(deletes) + len(catalogue) > cap:
            adds = self._not_there_yet(adds, changes.uploads, parent)
        pieces = plan_pieces(adds, catalogue, deletes, cap)
        urls: list[str] = []
        for n, ops in enumerate(pieces, start=1):
            message = changes.message if len(pieces) == 1 else f"{changes.message} (part {n} of {len(pieces)})"
            urls.append(self._commit_once(ops, message, parent))
            parent = urls[-1].rsplit("/", 1)[-1]
            if len(pieces) > 1:
                notes.append(f"committed part {n} of {len(pieces)} ({len(ops)} file(s)): {urls[-1]}")
                log.info("%s", notes[-1])
        return urls or [self.commit_url(parent)]  # every file already there: nothing left to commit

    def _not_there_yet(self, adds: list[Any], uploads: Sequence[Upload], parent: str) -> list[Any]:
        """The adds whose path at ``parent`` does not already hold the same bytes (an earlier piece landed)."""
        by_path = {u.path: u.sha256 for u in uploads}
        # Small files (PEP 658 METADATA) are stored inline, named by their git blob id, not an LFS sha256.
        git_ids = {u.path: _git_blob_id(u.source) for u in uploads if u.source is not None and u.size < _INLINE_MAX}
        there: set[str] = set()
        paths = sorted(by_path)
        for start in range(0, len(paths), _PATHS_INFO_BATCH):
            chunk = paths[start : start + _PATHS_INFO_BATCH]

            def ask(chunk: list[str] = chunk) -> list[Any]:
                return list(self.api.get_paths_info(self.repo_id, chunk, repo_type=REPO_TYPE, revision=parent))

            for item in self._read("paths info", ask):
                lfs = getattr(item, "lfs", None)
                held = lfs.sha256 if lfs is not None else getattr(item, "blob_id", None)
                wanted = by_path.get(item.path) if lfs is not None else git_ids.get(item.path)
                if held is not None and held == wanted:
                    there.add(item.path)
        if there:
            log.info("%s: %d wheel(s) already there from an earlier piece; not sent again", self.location, len(there))
        return [op for op in adds if op.path_in_repo not in there]

    @staticmethod
    def _add(upload: Upload) -> CommitOperationAdd:
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

    def _note_new_head(self) -> None:
        """Read the head once more after a commit, so that an offline read later finds this commit's index,
        and pin this run's later reads to it (not to the parent, which lacks the change just made)."""
        try:
            self._sha = self._head()
        except LibrarianError as e:
            self._sha = None  # the next read asks for the head again
            log.info("%s: could not read the head after committing (%s)", self.location, e)

    def _catalogue_ops(self, old: Index, changes: Changes) -> list[Any]:
        """The generated files (index, shards, pages, card) that change, as operations."""
        tree = None
        if changes.rebuild:
            # reindex's repair: compare with what the tree holds, not with what the old index renders.
            # (pending entries are not generated from the index: the change itself deletes those it merges)
            gone = set(changes.deletes)
            listed = {f.path for f in self.list_files().files
                      if is_generated(f.path) and f.path not in gone and parse_pending_path(f.path) is None}  # fmt: skip
            tree = {path: data for path in listed if (data := self.read_file(path)) is not None}
        card = None
        if changes.index.entries:  # an empty store gets no card: its current one is not even read
            card = CardSource(self.read_file(CARD), self.repo_id, public_endpoint(self.api.endpoint), self.license)
        generated = plan_generated(old, changes.index, tree=tree, card=card)
        ops: list[Any] = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in generated.writes]
        return ops + [CommitOperationDelete(path_in_repo=p) for p in generated.deletes]

    def _landed(self, change_id: str) -> str | None:
        """The URL of the commit carrying ``change_id`` when it is in the history (its answer may have been lost)."""
        try:
            commits = self._read(
                "commit history", lambda: self.api.list_repo_commits(self.repo_id, repo_type=REPO_TYPE, revision=self.revision)
            )
        except LibrarianError:
            return None
        found = next((c for c in commits[:200] if change_id in (c.message or "")), None)
        return None if found is None else self.commit_url(found.commit_id)

    def _create_repo(self) -> str:
        if not self.create:
            raise self._missing_repo()
        with self._translated("create repo"):
            retrying(f"{self.location}: create repo", lambda: self.api.create_repo(self.repo_id, repo_type=REPO_TYPE, exist_ok=True), self.policy)
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
            response = e.response
            if response is not None and response.status_code == 401 and response.headers.get("X-Error-Code") != "RepoNotFound":
                # huggingface_hub reads any 401 from an https:// Hub as "no such repo"; a bad token is not that.
                raise Unreachable(f"{self.location}: {what}: refused (HTTP 401); check HF_TOKEN or `hf auth login`") from e
            raise self._missing_repo() from e
        except RevisionNotFoundError as e:
            raise StoreError(f"{self.location}: no revision {self.revision!r}") from e
        except EntryNotFoundError as e:
            raise _NoEntry(f"{self.location}/{what}: no such file") from e
        except OfflineModeIsEnabled as e:
            raise _Unreachable(f"{self.location}: HF_HUB_OFFLINE is set; {what} needs the network", "HF_HUB_OFFLINE is set") from e
        except HfHubHTTPError as e:
            status = e.response.status_code if e.response is not None else None
            if conflicts and status == 412:
                raise _Conflict(f"{self.location}: the repo moved on") from e
            if status == 429 and (conflicts or (rate_limit_wait(e) or 0) > self.policy.max_wait):
                # Not a conflict: the Hub allows no more of these for a while; say how long.
                wait, words = rate_limit_wait(e), server_words(e)
                said = f"; {clean(words, 160)}" if words else ""
                message = f"{self.location}: {what}: the Hub is limiting our requests (HTTP 429{said}); retry in {_say_wait(wait)}"
                raise _RateLimited(message, wait, words, conflicts) from e
            if conflicts and status is not None and status >= 500:
                raise _Transient(f"{what}: HTTP {status}") from e
            if status in (401, 403):
                raise Unreachable(f"{self.location}: {what}: refused (HTTP {status}); check HF_TOKEN or `hf auth login`") from e
            if status in RETRY_STATUS:
                why = f"the Hub answered HTTP {status}, also after retries"
                raise _Unreachable(f"{self.location}: {what}: {why}; try again later", why) from e
            raise StoreError(f"{self.location}: {what}: HTTP {status} {_short(e)}") from e
        except RuntimeError as e:
            # huggingface_hub wraps a failed LFS upload: RuntimeError("Error while uploading ...") from the cause.
            cause = e.__cause__
            if not isinstance(cause, (HfHubHTTPError, httpx2.TransportError, OSError)):
                raise
            if conflicts:
                raise _Transient(f"{what}: upload failed ({type(cause).__name__})") from e
            raise Unreachable(f"{self.location}: {what}: upload failed ({_short(cause)})") from e
        except (httpx2.TransportError, ConnectionError, TimeoutError) as e:
            if conflicts:
                raise _Transient(f"{what}: {type(e).__name__}") from e
            why = f"cannot reach the Hub ({describe(e)}, also after retries)"
            raise _Unreachable(f"{self.location}: {what}: {why}", why) from e


class _NoRepo(StoreError):
    pass


class _NoEntry(StoreError):
    pass


class _Conflict(StoreError):
    pass


class _Transient(StoreError):
    pass


class _RateLimited(Unreachable):
    """A 429: ``wait`` seconds as the Hub asks (``None`` if it did not say), ``words`` its message;
    ``commits`` when it refused a commit (the Hub's budget of commits per repo)."""

    def __init__(self, message: str, wait: float | None, words: str, commits: bool) -> None:
        super().__init__(message)
        self.wait, self.words, self.commits = wait, words, commits


class _Unreachable(Unreachable):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _backoff_wait(attempt: int) -> float:
    # Exponential with jitter, so that racing publishers spread out instead of colliding again in step.
    return float(min(8.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random()))


def _say_wait(seconds: float | None) -> str:
    """``43 min``, ``25 s``, ``2 h 5 min``."""
    if seconds is None:
        return "a while"
    s = max(0, round(seconds))
    if s < 120:
        return f"{s} s"
    minutes = -(-s // 60)
    if minutes <= 60:
        return f"{minutes} min"
    return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def _short(e: Exception) -> str:
    server = getattr(e, "server_message", None)
    return clean(str(server or e or type(e).__name__), 200)


_INLINE_MAX = 1 << 20  # files below this may be kept inline by the Hub: compare them by git blob id


def _git_blob_id(path: Path) -> str:
    """The id git (and the Hub, for a file kept inline) gives these bytes: sha1 of ``blob <size>\\0`` + bytes."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
