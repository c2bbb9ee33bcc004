"""What every store offers (the ``Store`` protocol) and the values that pass through it.

A store is a tree of files with an index. Every change is planned against a snapshot of the index and
applied in one atomic step by the store (``Store.update``): the local store holds a lock and renames
temp files, index last; the Hub store makes one commit with ``parent_commit`` and re-plans on conflict.
A store moves bytes only: what a change does to the generated files (index, shards, pages, card) is
rendered once, by :func:`librarian.generated.plan_generated`, and the store applies it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Generic, Protocol, TypeVar, runtime_checkable

from librarian.catalogue import catalogue_paths
from librarian.errors import StoreError
from librarian.index import BadEntry, Index, IndexEntry
from librarian.index_files import ROOT, parse_root, parse_shard
from librarian.layout import Layout
from librarian.safeio import sha256_stream

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file in a store's tree; ``sha256`` where the store knows it without reading the bytes."""

    path: str
    size: int
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Listing:
    """A store's whole tree. ``complete`` is false when the listing was cut short (gc refuses then)."""

    files: tuple[StoredFile, ...]
    complete: bool = True
    # Paths that are in the tree but are not stored files, and why: symbolic links, FIFOs, devices,
    # temp files and the journal an interrupted change left. Never read; verify reports each.
    strays: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Upload:
    """A local file to store at ``path``; ``source`` ``None``: bytes the store already holds, staged by
    :meth:`Store.stage_blobs` (an LFS object on the Hub, the file at ``path`` in a directory), or, with
    ``stored_at``, the file at that path of the store (a refiled wheel: copied there, never sent again;
    the change may delete ``stored_at`` itself, after the copy)."""

    path: str
    source: Path | None
    sha256: str
    size: int
    stored_at: str = ""


@dataclass(frozen=True, slots=True)
class Changes:
    """One atomic change of a store: files in, files out, and the index that results."""

    index: Index
    uploads: tuple[Upload, ...] = ()
    deletes: tuple[str, ...] = ()
    message: str = "librarian"
    # Rewrite every generated file (index, shards, pages) that differs from what the index renders,
    # and remove generated files it no longer renders, even when no wheel changes (reindex's repair).
    # Both stores honour it: the local one against its files, the Hub one against the tree at the commit.
    rebuild: bool = False
    # One commit however many files (an adoption: its files are small, and pieces would leave a store half
    # taken in); otherwise a store may cut a big change into pieces, the index last (the Hub, past ~100 files).
    whole: bool = False

    @property
    def empty(self) -> bool:
        """Whether applying this would change no wheel."""
        return not self.uploads and not self.deletes


R = TypeVar("R")
# An operation's plan: the store's current index in; the change to make and the operation's own result out
# (a publish plan, a gc report, ...). A store may run it more than once (the Hub re-plans on a conflict).
Planner = Callable[[Index], tuple[Changes, R]]


@dataclass(frozen=True)  # no slots: a generic dataclass with slots trips CPython 3.10
class Applied(Generic[R]):
    """What a store did: the changes it applied, the plan's result for them, and where (a commit URL or a directory)."""

    changes: Changes
    result: R
    where: str = ""
    attempts: int = 1
    notes: tuple[str, ...] = field(default=())
    commit: str = ""  # the web URL of the commit made, where the store makes commits (the Hub)


@dataclass(frozen=True, slots=True)
class Blob:
    """Stored content, counted once however many paths name it: an LFS object on the Hub."""

    sha256: str
    size: int
    name: str = ""  # a path that names it


class Store(Protocol):
    """A wheel store: a tree of files with an index. What every store implements (the core).

    A new store (S3, a storage bucket, a plain HTTP mirror) is one module implementing these members and
    :func:`~librarian.stores.open_store`'s line that picks it; ops use nothing else of it. It implements a
    capability below (:class:`Stages`, :class:`UploadStorage`, :class:`LocalFiles`) only where it really has
    it: ops ask ``isinstance(store, Stages)`` and do without, or say plainly that this store cannot. The
    contract suite (``tests/test_store_contract.py``) runs every core case on the local store, the Hub store
    and a minimal in-memory store that implements the core alone.

    - reads fail with :class:`~librarian.errors.StoreError` (exit 2) when the store does not exist yet;
      a store made for publishing (``create``) reads as empty until its first change makes it;
    - a path that could leave the tree (``..``, absolute, empty segments) is refused (BadInput) before any I/O;
    - :meth:`update` is the only write of the core, and is atomic: all of a change or none of it.
    """

    @property
    def kind(self) -> str:
        """What kind of store it is (``local``, ``hub``, ...), for people and reports; ops never branch on it."""

    @property
    def location(self) -> str:
        """How users name this store (a directory or ``hf://datasets/owner/name``)."""

    @property
    def revision(self) -> str:
        """The branch or tag read and written (``main``), or ``""`` for a store without revisions."""

    def read_file(self, path: str) -> bytes | None:
        """A small file's bytes (index, shards), or ``None`` if the store has no such file."""

    def list_files(self) -> Listing:
        """Every file in the store."""

    def open(self, path: str) -> AbstractContextManager[BinaryIO]:
        """The stored file, open for reading, as a context manager; StoreError if the store has no such file.

        The file's ``name`` is where its bytes lie on this machine while it is open (a directory's file
        itself; a download elsewhere, removed on exit), for readers that open it again by path (a zip read
        by several threads).
        """

    def fetch(self, path: str, dest: Path, sha256: str | None = None) -> Path:
        """Copy a stored file to ``dest`` (temp file, then rename) and return ``dest``. ``sha256``, when the
        caller knows what the bytes hash to, lets a remote store serve a copy it keeps on this machine."""

    def url_for(self, path: str) -> str:
        """A URL pip and uv can fetch the file from, pinned to what was read (``file://``, or the Hub's
        ``resolve/<commit>/<path>``), so that a requirements file that names it is reproducible."""

    def update(self, plan: Planner[R], default_layout: Layout) -> Applied[R]:
        """Plan against the current index and apply the result atomically (re-planning on conflict).

        Reads the planner makes through this store (``read_file``, ``list_files``) see the same state
        the change is applied to: the Hub store pins them to the parent commit, the local one holds its lock.
        A change with :func:`nothing_to_do` is not applied. The generated files are rendered by
        :func:`~librarian.generated.plan_generated` (on a rebuild, against :func:`generated_in_tree`).
        """


@runtime_checkable
class Stages(Protocol):
    """A store that can add files without touching its index, so that many jobs add at once and one
    ``reindex`` merges them (``publish --stage``): the local store and the Hub."""

    def stage(self, uploads: Sequence[Upload], files: Mapping[str, bytes], message: str) -> str:
        """Add files in one atomic step that touches no index file, so it never conflicts; returns the URL
        of the commit made, or ``""`` where the store makes no commits."""


@runtime_checkable
class UploadStorage(Protocol):
    """A store that keeps bytes by sha256 outside its tree until a change refers to them, and keeps them
    after the change that removed their last file (the Hub's LFS objects): bytes can be put there without
    a change (``publish --stage --manifest``), and freed for good (``gc --purge``)."""

    def stage_blobs(self, uploads: Sequence[Upload]) -> str:
        """Put the uploads' bytes in upload storage, without a change; returns the head planned against."""

    def missing_blobs(self, blobs: Sequence[Blob]) -> tuple[Blob, ...]:
        """Those of ``blobs`` (sha256, size) upload storage does not hold."""

    def purgeable(self, leaving: Iterable[str] = (), grace: float = 0.0) -> tuple[Blob, ...]:
        """Every stored blob that no file references at any branch's or tag's head (the revision's
        ``leaving`` paths aside), stored more than ``grace`` seconds ago."""

    def purge(self, blobs: Sequence[Blob]) -> None:
        """Permanently delete ``blobs`` (from the whole history, on the Hub)."""


@runtime_checkable
class ListsFolders(Protocol):
    """A store that can list one folder without its whole tree (the Hub: one request, not the tree's
    pages): plan and the card read the failure records so."""

    def list_folder(self, folder: str) -> Listing:
        """The files under ``folder`` (none where there is no such folder)."""


@runtime_checkable
class CachedReads(Protocol):
    """A store that can answer from what this machine already holds, reaching nothing: shell completion
    reads the index so, on every TAB (a local store's files; the Hub store's read cache)."""

    def cached_file(self, path: str) -> bytes | None:
        """A small file as this machine holds it now (``None``: not here), without any network or write."""


@runtime_checkable
class Journals(Protocol):
    """A store that finishes an interrupted change from a journal (the local store): a journal it cannot
    follow (unreadable, or naming a path outside the store) stops every change until it is dropped."""

    def drop_unfollowable_journal(self) -> str | None:
        """Remove a journal that cannot be followed, saying what it held; None when there is none such."""


@runtime_checkable
class LocalFiles(Protocol):
    """A store whose files are on this machine: opening one downloads nothing, and two paths can be one
    file (hard links), so reading is cheap and a file has an identity besides its sha256."""

    def file_identity(self, path: str) -> tuple[int, int]:
        """The stored file's ``(device, inode)``: paths that share it share their bytes."""


def nothing_to_do(old: Index, changes: Changes) -> bool:
    """Whether ``changes`` leaves the store as it is (no file, no entry, no rebuild): no store applies it."""
    return changes.empty and changes.index == old and not changes.rebuild


def generated_in_tree(store: Store, new: Index, gone: Iterable[str] = ()) -> dict[str, bytes | None]:
    """For a rebuild: the generated files the store holds (those in ``gone`` aside), with the bytes of those
    ``new`` renders (compared with what it renders) and ``None`` for the others (not read: removed)."""
    from librarian.generated import rebuilds  # here: a pull reads a store and renders no page or card

    wanted = catalogue_paths(new)
    skip = set(gone)
    listed = {f.path for f in store.list_files().files if rebuilds(f.path) and f.path not in skip}
    held: dict[str, bytes | None] = {path: None for path in listed if path not in wanted}
    for path in sorted(listed & wanted):
        if (data := store.read_file(path)) is not None:
            held[path] = data
    return held


def missing_at_paths(store: Store, blobs: Sequence[Blob]) -> tuple[Blob, ...]:
    """Those of ``blobs`` that no file at their path (``Blob.name``) holds with that size and sha256: where a
    store keeps no upload storage, staged bytes wait in the tree itself."""
    listed = {f.path: f for f in store.list_files().files}
    missing = []
    for blob in blobs:
        found = listed.get(blob.name)
        if (
            found is None
            or found.size != blob.size
            or (found.sha256 or sha256_stored(store, blob.name)) != blob.sha256
        ):
            missing.append(blob)
    return tuple(missing)


def read_index(store: Store, default_layout: Layout, packages: Iterable[str] | None = None) -> Index:
    """The store's index: the root and the shards of ``packages`` (all when ``None``).

    A store with no ``index.json`` yet is empty and gets ``default_layout``.
    """
    root_bytes = store.read_file(ROOT)
    if root_bytes is None:
        return Index(default_layout)
    root = parse_root(root_bytes, f"{store.location}/{ROOT}")
    wanted = root.shards.keys() if packages is None else [p for p in packages if p in root.shards]
    entries: list[IndexEntry] = []
    bad: list[BadEntry] = []
    for package in sorted(wanted):
        path = root.shards[package]
        shard = store.read_file(path)
        if shard is None:
            raise StoreError(f"{store.location}/{path}: shard listed in {ROOT} is missing")
        good, broken = parse_shard(shard, f"{store.location}/{path}", package)
        entries.extend(good)
        bad.extend(broken)
    log.info(
        "%s: read %s and %d shard(s)%s",
        store.location,
        ROOT,
        len(wanted),
        f" ({', '.join(root.shards[p] for p in sorted(wanted)[:5])}{', ...' if len(wanted) > 5 else ''})"
        if wanted
        else "",
    )
    for b in bad:
        log.warning(
            "%s/%s: skipped an index entry (%s); 'librarian reindex' repairs it",
            store.location,
            b.where,
            b.problem,
        )
    return Index(root.layout, tuple(sorted(entries, key=lambda e: e.path)), tuple(bad))


def sha256_stored(store: Store, path: str) -> str:
    """The sha256 of a stored file, read through :meth:`Store.open` (on the Hub: downloaded, then dropped)."""
    with store.open(path) as f:
        return sha256_stream(f)
