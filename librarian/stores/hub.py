"""The Hugging Face dataset store: ``hf://datasets/<owner>/<name>[@<revision>]``, or the repo's web URL.

This module and its ``hub_*`` siblings are the only ones that import ``huggingface_hub``, and only a Hub
store imports them (:func:`librarian.stores.open_store` imports this one lazily, for start-up time).

Reads, pinned to one commit, are :class:`~librarian.stores.hub_read.HubReader`'s; LFS objects are
``hub_lfs``'s; the client's errors are translated in ``hub_errors``; time-outs and read retries are ``hub_http``'s.

Every change is one ``create_commit`` with ``parent_commit`` set to the revision the plan was made
from. On a conflict (412) the index is read again, the plan made again, and the commit retried with
backoff. The commit POST is not retried by the client; when its answer is lost, the history is read
for the commit's marker before trying again, so a change never lands twice.
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from librarian import progress
from librarian.build_failure import FAILURES_DIR, MAX_RECORD_BYTES, BuildFailure, parse_failure
from librarian.card import CARD
from librarian.errors import BadInput, LibrarianError, StoreError, Unreachable
from librarian.generated import CardSource, Generated, plan_generated
from librarian.index import Index
from librarian.layout import Layout
from librarian.stores.base import (
    Applied,
    Blob,
    Changes,
    Planner,
    R,
    Upload,
    generated_in_tree,
    nothing_to_do,
    read_index,
)
from librarian.stores.hub_address import parse_hub_address, public_endpoint
from librarian.stores.hub_errors import Conflict, RateLimited, Transient, commits_refused, say_wait
from librarian.stores.hub_http import backoff, retrying
from librarian.stores.hub_lfs import REPO_TYPE, LfsObjects, add_operation
from librarian.stores.hub_read import HubReader
from librarian.stores.pieces import plan_pieces

__all__ = ["HubStore", "parse_hub_address", "public_endpoint"]

log = logging.getLogger(__name__)

T = TypeVar("T")
MARKER = "librarian-change-id"
MAX_ATTEMPTS = int(os.environ.get("LIBRARIAN_HUB_ATTEMPTS", "12"))
MAX_READ_FAILURES = 200  # failure records read for the card (each is one small download)


class HubStore(HubReader):
    """A dataset repo on the Hugging Face Hub (or any server speaking its API, via HF_ENDPOINT)."""

    @classmethod
    def from_url(
        cls, url: str, *, create: bool = False, license: str | None = None, install: str | None = None
    ) -> HubStore:
        """A store for ``hf://datasets/owner/name[@revision]`` or the repo's web URL."""
        parsed = parse_hub_address(url)
        if parsed is None:
            raise BadInput(f"{url}: not a Hub dataset repo (expected hf://datasets/OWNER/NAME[@REVISION])")
        return cls(parsed[0], parsed[1], create=create, license=license, install=install)

    @property
    def kind(self) -> str:
        """``hub``."""
        return "hub"

    @property
    def _lfs(self) -> LfsObjects:
        return LfsObjects(self.api, self.repo_id, self.revision, self.location, self._read, self._translated)

    # --- freeing storage ----------------------------------------------------------------------

    def purgeable(self, leaving: Iterable[str] = (), grace: float = 0.0) -> tuple[Blob, ...]:
        """Every LFS object no file references at the head of any branch, tag or pull request (the
        revision's ``leaving`` paths aside) and pushed more than ``grace`` seconds ago: what earlier gcs
        left in the history as well as what this one removes."""
        self._sha = head = self._head()
        if head is None:
            raise self._missing_repo()
        gone = set(leaving)
        refs = self._read(
            "refs",
            lambda: self.api.list_repo_refs(self.repo_id, repo_type=REPO_TYPE, include_pull_requests=True),
        )
        heads = {r.target_commit for r in (*refs.branches, *refs.tags, *(refs.pull_requests or ()))} | {head}
        referenced: set[str] = set()
        for sha in sorted(heads):
            for f in self._listing_at(sha).files:
                if f.sha256 is not None and not (sha == head and f.path in gone):
                    referenced.add(f.sha256)
        return self._lfs.unreferenced(referenced, grace)

    def purge(self, blobs: Sequence[Blob]) -> None:
        """Permanently delete the LFS objects ``blobs`` name (the history keeps its commit ids)."""
        self._lfs.purge(blobs)

    # --- writing: one commit per change, in pieces when it is big ----------------------------------

    def update(self, plan: Planner[R], default_layout: Layout) -> Applied[R]:
        """Plan against the head, commit with ``parent_commit``; on conflict re-plan and retry.

        A change of more than ``policy.commit_ops`` files is committed in pieces, wheels first and the
        index last, each piece's parent the one before (see :meth:`_commit_pieces`); a ``whole`` change
        (an adoption) in one commit however many files.
        """

        def step(attempt: int, notes: list[str]) -> Applied[R]:
            self._sha = parent = self._head()  # the live head, never a cached one: it becomes parent_commit
            if parent is None:
                self._sha = parent = self._create_repo()
            old = read_index(self, default_layout)
            changes, result = plan(old)
            if nothing_to_do(old, changes):
                return Applied(changes, result, self.location, attempt, tuple(notes))
            with tempfile.TemporaryDirectory(prefix="librarian-copies-") as copies:
                changes = self._copies_sent(changes, Path(copies))
                urls, generated = self._commit_pieces(old, changes, parent, notes)
            # This commit's index, cached as the parent's plus what was written: a pull after it works
            # offline (the parent's whole index was read above, to plan).
            made = urls[-1].rsplit("/", 1)[-1]
            # Uploaded earlier, committed by reference.
            staged = [u for u in changes.uploads if u.source is None]
            if staged:
                self._lfs.prove(staged, made)
            if made != parent:
                self._cache.derive(parent, made, dict(generated.writes), generated.deletes)
            self._note_new_head()
            return Applied(changes, result, urls[-1], attempt, tuple(notes), commit=urls[-1])

        return self._attempts(step)

    def _copies_sent(self, changes: Changes, folder: Path) -> Changes:
        """The change with each copy of a file stored inline (not an LFS object, which a commit names by its
        sha256 alone) downloaded into ``folder`` and sent as bytes: a refiled wheel the Hub keeps in git."""
        listed = {f.path: f for f in self.list_files().files}
        uploads = []
        for u in changes.uploads:
            held = listed.get(u.stored_at) if u.source is None and u.stored_at else None
            if held is not None and held.sha256 is None:
                local = self.fetch(u.stored_at, folder / u.sha256 / PurePosixPath(u.stored_at).name)
                u = replace(u, source=local)
            uploads.append(u)
        return replace(changes, uploads=tuple(uploads))

    def stage(self, uploads: Sequence[Upload], files: Mapping[str, bytes], message: str) -> str:
        """One commit of adds only, without ``parent_commit``: it holds no index file, so it fits any head."""

        def step(attempt: int, notes: list[str]) -> str:
            self._sha = self._head()
            if self._sha is None:
                self._create_repo()
            operations: list[Any] = [add_operation(u) for u in sorted(uploads, key=lambda u: u.path)]
            operations += [
                CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in sorted(files.items())
            ]
            return self._commit_once(operations, message, None)

        return self._attempts(step)

    def stage_blobs(self, uploads: Sequence[Upload]) -> str:
        """Upload the wheels' bytes as LFS objects without a commit (huggingface_hub's pre-upload).

        Returns the head the caller planned against. Blobs already on the Hub are not sent again.
        """
        head = self._head() or self._create_repo()
        self._lfs.upload(uploads)
        return head

    def missing_blobs(self, blobs: Sequence[Blob]) -> tuple[Blob, ...]:
        """Those of ``blobs`` the repo's LFS storage does not hold with that sha256 and size."""
        return self._lfs.missing(blobs)

    def _attempts(self, step: Callable[[int, list[str]], T]) -> T:
        """The one commit loop: ``step`` again on a conflict (re-plan), a transient failure (backoff) or a
        short rate limit (its wait); a long rate limit ends the command at once (exit 3).

        Not a second copy of :func:`hub_http.retrying`, which repeats one idempotent call as it was: a commit
        is not idempotent (a lost answer is looked up in the history, never resent blindly) and a conflict
        needs a new plan against the new head, so this loop runs the whole step again. Both wait by
        :func:`hub_http.backoff`; the reads inside a step keep their own bounded retries.
        """
        notes: list[str] = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return step(attempt, notes)
            except Conflict:
                notes.append(f"attempt {attempt}: the repo moved on; planning again")
                wait = backoff(attempt, self.policy.commit_backoff)
            except Transient as e:
                notes.append(f"attempt {attempt}: {e}")
                wait = backoff(attempt, self.policy.commit_backoff)
            except RateLimited as e:
                if not e.commits:
                    raise
                if e.wait is None or e.wait > self.policy.max_wait:
                    raise commits_refused(self.location, e) from e
                notes.append(
                    f"attempt {attempt}: the Hub limits commits; waiting {say_wait(e.wait)} as it asks "
                    f"(up to {say_wait(self.policy.max_wait)}: LIBRARIAN_HUB_MAX_WAIT)"
                )
                wait = e.wait + random.random() * 4 * self.policy.commit_backoff
                log.warning("%s: %s", self.location, notes[-1])
                time.sleep(wait)
                continue
            log.info("%s", notes[-1])
            time.sleep(wait)
        raise Unreachable(
            f"{self.location}: could not commit after {MAX_ATTEMPTS} attempts ({notes[-1] if notes else ''})"
        )

    def _commit_once(self, operations: list[Any], message: str, parent: str | None) -> str:
        """One ``create_commit`` carrying a marker; a lost answer is looked up in the history. Returns its URL."""
        change_id = uuid.uuid4().hex
        try:
            bar = progress.task(f"commit {len(operations)} file(s)", unit="files")
            with self._translated("commit", conflicts=True), bar:
                info = self.api.create_commit(
                    self.repo_id,
                    operations,
                    commit_message=message,
                    commit_description=f"{MARKER}: {change_id}",
                    repo_type=REPO_TYPE,
                    revision=self.revision,
                    parent_commit=parent,
                )
        except Transient:
            landed = self._landed(change_id)
            if landed is None:
                raise
            log.info("%s: the commit's answer was lost; found it in the history", self.location)
            return landed
        return self.commit_url(str(info.oid))

    def _commit_pieces(
        self, old: Index, changes: Changes, parent: str, notes: list[str]
    ) -> tuple[list[str], Generated]:
        """Commit ``changes`` in pieces of at most ``policy.commit_ops`` files: wheels first, then the index
        (with as many deletions as fit), then the remaining deletions. The index never names a file that
        is not there: a failure between pieces leaves only files the index does not list yet, which the
        next publish (it skips wheels already there) or ``reindex --adopt`` picks up."""
        adds = [add_operation(u) for u in sorted(changes.uploads, key=lambda u: u.path)]
        uploaded = {u.path for u in changes.uploads}
        deletes = [CommitOperationDelete(path_in_repo=p) for p in changes.deletes if p not in uploaded]
        generated = self._generated(old, changes, parent)
        catalogue: list[Any] = [
            CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in generated.writes
        ]
        catalogue += [CommitOperationDelete(path_in_repo=p) for p in generated.deletes]
        total = len(adds) + len(deletes) + len(catalogue)
        cap = max(self.policy.commit_ops, total) if changes.whole else self.policy.commit_ops
        if total > cap:
            adds = self._lfs.not_there_yet(adds, changes.uploads, parent)
        pieces = plan_pieces(adds, catalogue, deletes, cap)
        urls: list[str] = []
        for n, ops in enumerate(pieces, start=1):
            message = (
                changes.message if len(pieces) == 1 else f"{changes.message} (part {n} of {len(pieces)})"
            )
            urls.append(self._commit_once(ops, message, parent))
            parent = urls[-1].rsplit("/", 1)[-1]
            if len(pieces) > 1:
                notes.append(f"committed part {n} of {len(pieces)} ({len(ops)} file(s)): {urls[-1]}")
                log.info("%s", notes[-1])
        return urls or [
            self.commit_url(parent)
        ], generated  # every file already there: nothing left to commit

    def _note_new_head(self) -> None:
        """Read the head once more after a commit, so that an offline read later finds this commit's index,
        and pin this run's later reads to it (not to the parent, which lacks the change just made)."""
        try:
            self._sha = self._head()
        except LibrarianError as e:
            self._sha = None  # the next read asks for the head again
            log.info("%s: could not read the head after committing (%s)", self.location, e)

    def _generated(self, old: Index, changes: Changes, parent: str | None = None) -> Generated:
        """The generated files (index, shards, pages, card) that change."""
        # reindex's repair: compare with what the tree holds, not with what the old index renders.
        tree = generated_in_tree(self, changes.index, changes.deletes) if changes.rebuild else None
        card = None
        if changes.index.entries:  # an empty store gets no card: its current one is not even read
            card = CardSource(
                self.read_file(CARD),
                self.repo_id,
                public_endpoint(self.api.endpoint),
                self.license,
                self.install,
                parent,
                frozenset(e.path for e in old.entries if e.path not in changes.deletes),
                self._failure_records(),
            )
        return plan_generated(old, changes.index, tree=tree, card=card)

    def _failure_records(self) -> tuple[BuildFailure, ...]:
        """The failed builds this commit holds (``failures/``), for the card; a record that does not parse
        is left out (verify names it), and a listing that fails leaves the card without them."""
        try:
            listed = self.list_folder(FAILURES_DIR)
        except LibrarianError as e:
            log.info("%s: failure records not read for the card (%s)", self.location, e)
            return ()
        found = []
        for f in listed.files[:MAX_READ_FAILURES]:
            if not f.path.endswith(".json") or f.size > MAX_RECORD_BYTES:
                continue
            try:
                data = self.read_file(f.path)
                if data is not None:
                    found.append(parse_failure(data, f.path))
            except (LibrarianError, ValueError):
                continue
        return tuple(found)

    def _landed(self, change_id: str) -> str | None:
        """The URL of the commit carrying ``change_id`` when it is in the history (its answer may have been lost)."""
        try:
            commits = self._read(
                "commit history",
                lambda: self.api.list_repo_commits(self.repo_id, repo_type=REPO_TYPE, revision=self.revision),
            )
        except LibrarianError:
            return None
        found = next((c for c in commits[:200] if change_id in (c.message or "")), None)
        return None if found is None else self.commit_url(found.commit_id)

    def _create_repo(self) -> str:
        if not self.create:
            raise self._missing_repo()
        with self._translated("create repo"):
            retrying(
                f"{self.location}: create repo",
                lambda: self.api.create_repo(self.repo_id, repo_type=REPO_TYPE, exist_ok=True),
                self.policy,
            )
        head = self._head()
        if head is None:
            raise StoreError(f"{self.location}: created, but the repo is still not there")
        self._sha = head
        return head
