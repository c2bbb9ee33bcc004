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

import json
import logging
import os
import random
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

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
from huggingface_hub.utils import logging as hf_logging
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils.tqdm import disable_progress_bars

from librarian import progress
from librarian.catalogue import CARD, merge_card, render_card_block, render_catalogue
from librarian.errors import BadInput, LibrarianError, StoreError, Unreachable
from librarian.index import Index
from librarian.layout import Layout
from librarian.redact import clean, register_secret
from librarian.stores.base import Applied, Blob, Changes, Listing, Planner, StoredFile, Upload, read_index
from librarian.stores.hub_http import RETRY_STATUS, NetPolicy, bound_session, describe, retrying

log = logging.getLogger(__name__)

T = TypeVar("T")
_NAME = r"[A-Za-z0-9][\w.-]*/[\w.-]+"
_HF_URL = re.compile(rf"hf://datasets/(?P<repo>{_NAME}?)(?:@(?P<rev>\S+?))?/?")
_WEB_PATH = re.compile(rf"/datasets/(?P<repo>{_NAME}?)(?:/tree/(?P<rev>[^/]+)(?:/.*)?)?/?")
HUB_HOSTS = ("huggingface.co", "hf.co", "www.huggingface.co")
USAGE = "expected a directory, hf://datasets/OWNER/NAME[@REVISION] or https://huggingface.co/datasets/OWNER/NAME"
REPO_TYPE = "dataset"
MARKER = "librarian-change-id"
MAX_ATTEMPTS = int(os.environ.get("LIBRARIAN_HUB_ATTEMPTS", "12"))
_CHUNK = 1 << 20
KEEP_COMMITS = 8  # commits whose index files the cache keeps (besides each revision's newest head)


def _offline() -> bool:
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}


def _origin(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of a URL, without credentials."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.rsplit("@", 1)[-1].lower()


def public_endpoint(endpoint: str) -> str:
    """The endpoint without credentials (``https://user:pass@mirror`` -> ``https://mirror``)."""
    parts = urlsplit(endpoint)
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl().rstrip("/")


def parse_hub_address(text: str) -> tuple[str, str] | None:
    """``(repo_id, revision)`` for a Hub dataset address, ``None`` for a path; BadInput for another URL.

    Accepted: ``hf://datasets/OWNER/NAME[@REV]``, and ``https://huggingface.co/datasets/OWNER/NAME``
    (optionally ``/tree/REV``), the same under the configured endpoint (HF_ENDPOINT).
    """
    text = text.strip()
    if "://" not in text:
        return None
    if text.startswith("hf://"):
        m = _HF_URL.fullmatch(text)
        if m is None:
            raise BadInput(f"{text}: not a Hub dataset repo ({USAGE})")
        return m["repo"], m["rev"] or "main"
    scheme, host = _origin(text)
    known = {("https", h) for h in HUB_HOSTS} | {_origin(constants.ENDPOINT), _origin(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT)}
    m = _WEB_PATH.fullmatch(urlsplit(text).path) if (scheme, host) in known else None
    if m is None or urlsplit(text).query:
        raise BadInput(f"{text}: not a store address ({USAGE})")
    return m["repo"], unquote(m["rev"]) if m["rev"] else "main"


class _Cache:
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
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".librarian-tmp-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)


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
        self._cache = _Cache(repo_id)
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

    # --- writing: one commit per change ---------------------------------------------------------

    def update(self, plan: Planner, default_layout: Layout) -> Applied:
        """Plan against the head, commit with ``parent_commit``; on conflict re-plan and retry."""
        change_id = uuid.uuid4().hex
        notes: list[str] = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            self._sha = parent = self._head()  # the live head, never a cached one: it becomes parent_commit
            if parent is None:
                self._sha = parent = self._create_repo()
            old = read_index(self, default_layout)
            changes = plan(old)
            if changes.empty and changes.index == old:
                return Applied(changes, self.location, attempt, tuple(notes))
            operations = self._operations(old, changes)
            description = f"{MARKER}: {change_id}"
            try:
                with self._translated("commit", conflicts=True), progress.task(f"commit {len(operations)} file(s)", unit="files"):
                    info = self.api.create_commit(
                        self.repo_id, operations, commit_message=changes.message, commit_description=description,
                        repo_type=REPO_TYPE, revision=self.revision, parent_commit=parent,
                    )
                url = self.commit_url(str(info.oid))
                self._note_new_head()
                return Applied(changes, url, attempt, tuple(notes), commit=url)
            except _Conflict:
                notes.append(f"attempt {attempt}: the repo moved on since {parent[:8]}; planning again")
            except _Transient as e:
                landed = self._landed(change_id)
                if landed is not None:
                    return Applied(changes, landed, attempt, (*notes, "the commit's answer was lost; found it in the history"), landed)
                notes.append(f"attempt {attempt}: {e}")
            log.info("%s", notes[-1])
            _backoff(attempt)
        raise Unreachable(f"{self.location}: could not commit after {MAX_ATTEMPTS} attempts ({notes[-1] if notes else ''})")

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
                with self._translated("commit", conflicts=True), progress.task(f"commit {len(operations)} file(s)", unit="files"):
                    info = self.api.create_commit(
                        self.repo_id, operations, commit_message=message, commit_description=f"{MARKER}: {change_id}",
                        repo_type=REPO_TYPE, revision=self.revision,
                    )
                return self.commit_url(str(info.oid))
            except _Conflict:
                # No parent was sent, but a busy server may still refuse a racing commit; adds replay safely.
                notes.append(f"attempt {attempt}: the server refused a racing commit; trying again")
            except _Transient as e:
                landed = self._landed(change_id)
                if landed is not None:
                    return landed
                notes.append(f"attempt {attempt}: {e}")
            log.info("%s", notes[-1])
            _backoff(attempt)
        raise Unreachable(f"{self.location}: could not commit after {MAX_ATTEMPTS} attempts ({notes[-1] if notes else ''})")

    def _note_new_head(self) -> None:
        """Read the head once more after a commit, so that an offline read later finds this commit's index."""
        try:
            self._head()
        except LibrarianError as e:
            log.info("%s: could not read the head after committing (%s)", self.location, e)

    def _operations(self, old: Index, changes: Changes) -> list[Any]:
        ops: list[Any] = []
        uploaded: set[str] = set()
        for upload in sorted(changes.uploads, key=lambda u: u.path):
            ops.append(CommitOperationAdd(path_in_repo=upload.path, path_or_fileobj=str(upload.source)))
            uploaded.add(upload.path)
        for path in changes.deletes:
            if path not in uploaded:
                ops.append(CommitOperationDelete(path_in_repo=path))
        before, after = render_catalogue(old), render_catalogue(changes.index)
        card = self._card(changes.index)
        if card is not None:
            after[CARD] = card
        for path, data in sorted(after.items()):
            if before.get(path) != data:
                ops.append(CommitOperationAdd(path_in_repo=path, path_or_fileobj=data))
        for path in sorted(set(before) - set(after)):
            ops.append(CommitOperationDelete(path_in_repo=path))
        return ops

    def _card(self, index: Index) -> bytes | None:
        """The dataset card with librarian's block brought up to date; what people wrote around it is kept."""
        if not index.entries:
            return None
        current = self.read_file(CARD)
        text = current.decode("utf-8", errors="replace") if current is not None else None
        block = render_card_block(index, self.repo_id, public_endpoint(self.api.endpoint))
        merged = merge_card(text, block, self.repo_id, self.license).encode()
        return None if merged == current else merged

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
            if conflicts and status is not None and (status >= 500 or status == 429):
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


class _Unreachable(Unreachable):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _backoff(attempt: int) -> None:
    # Exponential with jitter, so that racing publishers spread out instead of colliding again in step.
    time.sleep(min(8.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random()))


def _short(e: Exception) -> str:
    server = getattr(e, "server_message", None)
    return clean(str(server or e or type(e).__name__), 200)
