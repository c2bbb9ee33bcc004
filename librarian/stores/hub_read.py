"""Reading a Hub dataset repo, pinned to one commit: the read half of :class:`~librarian.stores.hub.HubStore`.

Reads are pinned to one commit (the revision's head when the run starts) and go through ``hub_http``:
time-outs on every call, retries of 408/429/5xx/time-outs within a bounded count and time. Files are
fetched with plain GETs of ``resolve/<commit>/<path>``: a wheel lands only in the caller's directory (no
second copy in the HF cache); small files (index, shards) are kept by commit under
``$HF_HOME/librarian`` with the newest head seen of each revision, so that with ``HF_HUB_OFFLINE=1``, or
when the Hub stays unreachable after the retries, the newest commit's index is used, and said.
Endpoint (HF_ENDPOINT) and token (HF_TOKEN, ``hf auth login``) are the client's own; the token is never
printed, logged or put in a message.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO, TypeVar
from urllib.parse import quote

from huggingface_hub import HfApi, constants, get_session, get_token, hf_hub_url, hf_raise_for_status
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import logging as hf_logging
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils.tqdm import disable_progress_bars

from librarian import progress
from librarian.errors import StoreError
from librarian.index_files import MAX_INDEX_BYTES
from librarian.layout import check_store_path
from librarian.redact import register_secret
from librarian.safeio import atomic_path, open_regular
from librarian.stores.base import Listing, StoredFile
from librarian.stores.hub_address import public_endpoint
from librarian.stores.hub_cache import ReadCache
from librarian.stores.hub_errors import CannotReach, NoEntry, NoRepo, no_repo, translated
from librarian.stores.hub_http import NetPolicy, bound_session, retrying
from librarian.stores.hub_lfs import REPO_TYPE

log = logging.getLogger(__name__)

T = TypeVar("T")
_CHUNK = 1 << 20


def _offline() -> bool:
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in {
        "1",
        "ON",
        "YES",
        "TRUE",
    }


def _age(date: str) -> str:
    """`` of 2026-12-01 10:00 UTC, 3 h ago``: when the cached commit was made, if known."""
    try:
        when = datetime.fromisoformat(date.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    seconds = max(0, int((datetime.now(timezone.utc) - when).total_seconds()))
    ago = (
        f"{seconds // 86400} d"
        if seconds >= 86400
        else f"{seconds // 3600} h"
        if seconds >= 3600
        else f"{seconds // 60} min"
    )
    return f" of {when.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC, {ago} ago"


# Endpoints said once in this run (the CLI clears it at each command; see librarian.cli.funnel).
announced: set[str] = set()


def announce_endpoint(endpoint: str) -> None:
    """Say, once a run and on stderr, that the Hub is not huggingface.co (HF_ENDPOINT points elsewhere): a typed
    huggingface.co URL goes there too."""
    public = public_endpoint(endpoint)
    if public.rstrip("/") != "https://huggingface.co" and public not in announced:
        announced.add(public)
        log.warning("the Hub here is %s (HF_ENDPOINT), not huggingface.co", public)


class HubReader:
    """A dataset repo on the Hub, read at one commit; :class:`~librarian.stores.hub.HubStore` adds the writes."""

    def __init__(
        self,
        repo_id: str,
        revision: str = "main",
        *,
        create: bool = False,
        api: HfApi | None = None,
        license: str | None = None,
        install: str | None = None,
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
        self.install = install
        self.api = api or HfApi()
        announce_endpoint(self.api.endpoint)
        token = self.api.token if isinstance(self.api.token, str) else get_token()
        register_secret(token)
        self._cache = ReadCache(repo_id)
        self._listings: dict[str, Listing] = {}  # the tree at each commit this run listed
        self._sha: str | None = None  # the commit every read of this run is pinned to
        self._offline_because = ""  # why reads come from the cache, when they do (said with what it serves)

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
            info = self._read(
                "repo info",
                lambda: self.api.repo_info(self.repo_id, repo_type=REPO_TYPE, revision=self.revision),
            )
        except NoRepo:
            return None
        sha = str(info.sha)
        modified = getattr(info, "last_modified", None)
        self._cache.remember_head(
            self.revision, sha, modified.isoformat() if isinstance(modified, datetime) else ""
        )
        return sha

    def _pinned(self) -> str | None:
        """The commit reads are pinned to; ``None`` for a repo that ``publish --create`` is about to make."""
        if self._sha is None:
            if _offline():
                self._sha = self._cached_head("HF_HUB_OFFLINE is set")
            else:
                try:
                    head = self._head()
                except CannotReach as e:
                    head = self._cached_head(e.reason)
                if head is None:
                    if self.create:
                        return None
                    raise self._missing_repo()
                self._sha = head
                log.info("%s: reading commit %s of %s", self.location, head[:12], self.revision)
        return self._sha

    def _cached_head(self, why: str) -> str:
        """The newest commit of the revision seen on this machine, said plainly (its index may be stale).

        Writes never come here: they need the live head for ``parent_commit``.
        """
        self._offline_because = why
        found = self._cache.head_dated(self.revision)
        if found is None:
            raise CannotReach(f"{self.location}: {why}, and nothing of this repo is cached here", why)
        sha, date = found
        log.warning(
            "%s: %s; using the cached index of commit %s%s (it may be stale)",
            self.location,
            why,
            sha[:12],
            _age(date),
        )
        return sha

    def _missing_repo(self) -> StoreError:
        return no_repo(self.location)

    def _get(
        self,
        sha: str,
        path: str,
        sink: Callable[[Iterator[bytes]], None],
        sized: Callable[[int | None], None] | None = None,
    ) -> None:
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
            raise CannotReach(
                f"{self.location}/{path}: HF_HUB_OFFLINE is set and commit {sha[:12]} of it is not cached here",
                "offline",
            )
        chunks: list[bytes] = []
        too_big = StoreError(
            f"{self.location}/{path}: over the {MAX_INDEX_BYTES}-byte limit of an index file"
        )

        def sized(length: int | None) -> None:
            if length is not None and length > MAX_INDEX_BYTES:  # said by its length, before a byte comes
                raise too_big

        def sink(stream: Iterator[bytes]) -> None:
            chunks.clear()
            got = 0
            for chunk in stream:
                got += len(chunk)
                if got > MAX_INDEX_BYTES:  # a server that does not say the length, or lies about it
                    raise too_big
                chunks.append(chunk)

        try:
            self._get(sha, path, sink, sized=sized)
        except NoEntry:
            return None
        data = b"".join(chunks)
        self._cache.put(sha, path, data)
        return data

    def cached_file(self, path: str) -> bytes | None:
        """The file at the newest head this machine has seen, from the read cache; nothing is fetched."""
        head = self._cache.head(self.revision)
        return self._cache.get(head, path) if head else None

    def list_files(self) -> Listing:
        """The whole tree at the pinned commit; LFS files come with their sha256."""
        sha = self._pinned()
        if sha is None:
            return Listing(())
        return self._listing_at(sha)

    def list_folder(self, folder: str) -> Listing:
        """The files under ``folder`` at the pinned commit: that folder's listing alone (a whole tree
        already listed this run answers it)."""
        sha = self._pinned()
        if sha is None:
            return Listing(())
        if (held := self._listings.get(sha)) is not None:
            return Listing(tuple(f for f in held.files if f.path.startswith(folder + "/")))

        def listing() -> list[StoredFile]:
            return [
                StoredFile(item.path, item.size, item.lfs.sha256 if item.lfs else None)
                for item in self.api.list_repo_tree(
                    self.repo_id, path_in_repo=folder, recursive=True, repo_type=REPO_TYPE, revision=sha
                )
                if isinstance(item, RepoFile)
            ]

        try:
            return Listing(tuple(sorted(self._read(f"{folder}/", listing), key=lambda f: f.path)))
        except NoEntry:  # no such folder: nothing in it
            return Listing(())

    def _listing_at(self, sha: str) -> Listing:
        """The whole tree at commit ``sha`` (listed once per run)."""
        held = self._listings.get(sha)
        # A commit's tree never changes: a planner and the store's rebuild share one listing.
        if held is not None:
            return held

        def listing() -> list[StoredFile]:
            return [
                StoredFile(item.path, item.size, item.lfs.sha256 if item.lfs else None)
                for item in self.api.list_repo_tree(
                    self.repo_id, recursive=True, repo_type=REPO_TYPE, revision=sha
                )
                if isinstance(item, RepoFile)
            ]

        found = self._listings[sha] = Listing(
            tuple(sorted(self._read("tree listing", listing), key=lambda f: f.path))
        )
        return found

    def fetch(self, path: str, dest: Path, sha256: str | None = None) -> Path:
        """Stream the file to ``dest`` (temp file, then rename). With ``sha256``, bytes this machine already
        downloaded (under any commit) are served from the cache, and new ones kept there (a hard link)."""
        check_store_path(path)
        sha = self._pinned()
        if sha is None:
            raise self._missing_repo()
        cached = self._cache.wheel(sha256) if sha256 else None
        if cached is not None:
            with atomic_path(dest) as tmp:
                shutil.copyfile(cached, tmp)
            say = log.warning if self._offline_because else log.info
            say("%s: served from this machine's cache (sha256 %s), not downloaded", path, sha256)
            return dest
        size: list[int | None] = [None]
        with atomic_path(dest) as tmp:

            def sink(stream: Iterator[bytes]) -> None:  # a retried download starts the file over ("wb")
                with (
                    open(tmp, "wb") as out,
                    progress.task(f"download {PurePosixPath(path).name}", size[0]) as bar,
                ):
                    for chunk in stream:
                        out.write(chunk)
                        bar.advance(len(chunk))

            try:
                self._get(sha, path, sink, sized=lambda n: size.__setitem__(0, n))
            except NoEntry as e:
                raise StoreError(f"{self.location}/{path}: not in the repo") from e
        if sha256:  # not hashed here: the caller checks the download, and the cache checks before it serves
            self._cache.keep_wheel(sha256, dest)
        return dest

    @contextmanager
    def open(self, path: str) -> Iterator[BinaryIO]:
        """The file, downloaded to a temp folder (as :meth:`fetch` does) and open; the folder goes on exit."""
        with tempfile.TemporaryDirectory(prefix="librarian-read-") as tmp:
            local = self.fetch(path, Path(tmp) / PurePosixPath(path).name)
            with open_regular(local) as f:
                yield f

    def url_for(self, path: str) -> str:
        """The file's ``resolve`` URL at the commit this run reads (not the branch, which moves)."""
        check_store_path(path)
        sha = self._pinned()
        if sha is None:
            raise self._missing_repo()
        base = public_endpoint(self.api.endpoint)
        return f"{base}/datasets/{self.repo_id}/resolve/{sha}/{quote(path)}"

    def _translated(self, what: str, conflicts: bool = False) -> AbstractContextManager[None]:
        """The client's errors raised inside, turned into ours (:func:`hub_errors.translated`)."""
        return translated(
            self.location, self.revision, what, max_wait=self.policy.max_wait, conflicts=conflicts
        )
