"""The store contract (``librarian.stores.base.Store``), one set of cases run on every store: the local
store in a temp dir, the Hub store through the real huggingface_hub client against the loopback Hub, and
a minimal in-memory store that implements the core alone (``tests/memory_store.py``). A capability
(staging, upload storage, local files) is tested on the stores that have it, and ops on one that has none.

Each case opens stores as the CLI does, one fresh store object per command run. Where the two stores
differ on purpose, the case says so in a comment and asserts each store's side; nothing is skipped.
"""

from __future__ import annotations

import hashlib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from huggingface_hub import HfApi

from librarian.card import CARD
from librarian.catalogue import render_catalogue
from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label
from librarian.errors import BadInput, Refused, StoreError
from librarian.index import Index, IndexEntry
from librarian.index_files import ROOT
from librarian.machine import Machine
from librarian.ops.machine.pull import Wants, pull
from librarian.ops.store.gc import gc
from librarian.ops.store.gc_policy import GcPolicy
from librarian.ops.store.publish import PublishOptions, publish
from librarian.ops.store.verify import verify
from librarian.pending import pending_path, render_pending
from librarian.stores.base import (
    Blob,
    Changes,
    LocalFiles,
    Planner,
    Stages,
    Store,
    Upload,
    UploadStorage,
    read_index,
    sha256_stored,
)
from librarian.stores.hub import HubStore
from librarian.stores.local import LocalStore
from tests.builders import make_wheel
from tests.loophub.server import LoopHub
from tests.memory_store import MemoryStore, MemoryTree

LAYOUT = load_layout()
LABEL = Label.parse("cu128torch2.8")
NOW = "2026-11-30T00:00:00Z"
REPO_ID = "team/wheels"


@dataclass
class Backend:
    """One kind of store under test; ``open`` gives a fresh store object, as each command run makes."""

    kind: str  # "local", "hub" or "memory"
    open: Callable[..., Store]
    hub: LoopHub | None = None
    memory: MemoryTree | None = None

    @property
    def extra_files(self) -> set[str]:
        # On purpose: the Hub repo also holds the .gitattributes of its first commit and the dataset
        # card (README.md) librarian keeps; a directory holds only wheels and generated files.
        return {".gitattributes", CARD} if self.kind == "hub" else set()


@pytest.fixture(params=["local", "hub", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        root = tmp_path / "house"
        return Backend("local", lambda create=False: LocalStore(root, may_create=create))
    if request.param == "memory":
        tree = MemoryTree()
        return Backend("memory", lambda create=False: MemoryStore(tree, create=create), memory=tree)
    hub: LoopHub = request.getfixturevalue("loophub")
    return Backend("hub", lambda create=False: HubStore(REPO_ID, create=create), hub)


@dataclass(frozen=True)
class Wheel:
    entry: IndexEntry
    upload: Upload
    data: bytes


def wheel(tmp_path: Path, n: int, sm: str = "89", version: str = "1.0", package: str = "kern") -> Wheel:
    """Wheel-named bytes (the store moves bytes only) filed in (package, sm, cu128torch2.8)."""
    data = f"wheel {n} ".encode() * (200 + n)
    cell = Cell(package, GpuArch.parse(sm), LABEL)
    filename = f"{package}-{version}+{LABEL}-cp312-cp312-linux_x86_64.whl"
    path = LAYOUT.path_for(cell, filename)
    source = tmp_path / "src" / f"{n}-{filename}"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    return Wheel(
        IndexEntry(path, digest, len(data), cell, NOW), Upload(path, source, digest, len(data)), data
    )


def adding(*wheels: Wheel, seen: list[Index] | None = None) -> Planner[None]:
    def plan(index: Index) -> tuple[Changes, None]:
        if seen is not None:
            seen.append(index)
        return Changes(
            index.with_entries(added=[w.entry for w in wheels]), tuple(w.upload for w in wheels), (), "add"
        ), None

    return plan


def removing(*wheels: Wheel) -> Planner[None]:
    paths = tuple(w.entry.path for w in wheels)
    return lambda index: (Changes(index.with_entries(removed=paths), (), paths, "remove"), None)


def paths_in(store: Store) -> set[str]:
    return {f.path for f in store.list_files().files}


def assert_consistent(store: Store) -> Index:
    """The index never names a missing file, and every generated file it renders is there."""
    index = read_index(store, LAYOUT)
    listed = {f.path: f for f in store.list_files().files}
    for e in index.entries:
        assert e.path in listed and listed[e.path].size == e.size, e.path
    assert set(render_catalogue(index)) <= set(listed)
    return index


@pytest.fixture
def two(backend: Backend, tmp_path: Path) -> tuple[Wheel, Wheel]:
    """A store holding two wheels (sm86 and sm89), published in one change."""
    a, b = wheel(tmp_path, 1, sm="86"), wheel(tmp_path, 2, sm="89")
    backend.open(create=True).update(adding(a, b), LAYOUT)
    return a, b


# ---- a missing store -------------------------------------------------------------------------------


def test_a_missing_store_is_an_error_exit_2(backend: Backend, tmp_path: Path) -> None:
    reads: list[Callable[[Store], object]] = [
        lambda s: s.read_file(ROOT),
        lambda s: s.list_files(),
        lambda s: s.fetch("kern/x.whl", tmp_path / "x.whl"),
        lambda s: sha256_stored(s, "kern/x.whl"),  # Store.open
        lambda s: s.update(adding(wheel(tmp_path, 1)), LAYOUT),
    ]
    for act in reads:
        with pytest.raises(StoreError) as caught:
            act(backend.open())
        assert caught.value.exit_code == 2 and "no such" in str(caught.value)
    store = backend.open(create=True)  # publish's store: empty until the first change makes it
    assert store.read_file(ROOT) is None and store.list_files().files == ()
    assert read_index(store, LAYOUT) == Index(LAYOUT)


def test_publish_creates_the_store(backend: Backend, tmp_path: Path) -> None:
    w = wheel(tmp_path, 1)
    applied = backend.open(create=True).update(adding(w), LAYOUT)
    assert applied.changes.index.entries == (w.entry,)
    # On purpose: the Hub names the commit it made; a directory has none.
    assert (
        applied.commit.startswith(f"{backend.hub.url}/datasets/{REPO_ID}/commit/")
        if backend.hub
        else applied.commit == ""
    )
    index = assert_consistent(backend.open())
    assert index.entries == (w.entry,) and index.layout.name == LAYOUT.name  # (the description is not stored)


# ---- reading ---------------------------------------------------------------------------------------


def test_read_file_absent_and_present(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    store = backend.open()
    assert store.read_file("kern/nothing-here.json") is None
    assert store.read_file("index/pending/kern/x.whl.0123456789abcdef.json") is None
    root = store.read_file(ROOT)
    assert root is not None and root == render_catalogue(read_index(store, LAYOUT))[ROOT]
    assert store.read_file(two[0].entry.path) == two[0].data


def test_list_files(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    listing = backend.open().list_files()
    assert listing.complete and listing.strays == ()
    index = read_index(backend.open(), LAYOUT)
    files = {f.path: f for f in listing.files}
    assert set(files) == {*(w.entry.path for w in two), *render_catalogue(index), *backend.extra_files}
    for w in two:
        # On purpose: the Hub's tree listing carries each LFS file's sha256; a directory's listing
        # would have to read every file for it, so it says None.
        assert files[w.entry.path].size == len(w.data)
        assert files[w.entry.path].sha256 == (w.entry.sha256 if backend.kind == "hub" else None)


def test_fetch_is_the_stored_bytes(backend: Backend, two: tuple[Wheel, Wheel], tmp_path: Path) -> None:
    store = backend.open()
    out = tmp_path / "out"
    got = store.fetch(two[1].entry.path, out / "b.whl")
    assert got == out / "b.whl" and hashlib.sha256(got.read_bytes()).hexdigest() == two[1].entry.sha256
    with pytest.raises(StoreError, match="not in the"):
        store.fetch("kern/sm89/torch2.8-cu128/absent-1.0-py3-none-any.whl", out / "c.whl")
    assert sorted(p.name for p in out.iterdir()) == ["b.whl"]  # no temp file left behind


def test_open_reads_the_stored_bytes(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    store = backend.open()
    # On purpose: only a directory has the files on this machine; the others copy each one opened.
    assert isinstance(store, LocalFiles) == (backend.kind == "local")
    with store.open(two[1].entry.path) as f:
        assert f.read() == two[1].data
        where = Path(
            f.name
        )  # the bytes lie there on this machine while open, for readers that reopen by path
        assert where.read_bytes() == two[1].data
    # On purpose: a directory opens the stored file itself; the Hub's download is gone once closed.
    assert where.is_file() if backend.kind == "local" else not where.exists()
    assert sha256_stored(store, two[0].entry.path) == two[0].entry.sha256
    with (
        pytest.raises(StoreError, match="not in the"),
        store.open("kern/sm89/torch2.8-cu128/absent-1.0-py3-none-any.whl"),
    ):
        pass


def test_url_for_serves_the_bytes(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    store = backend.open()
    url = store.url_for(two[0].entry.path)
    # On purpose: a file:// URL for a directory; on the Hub a resolve URL pinned to the commit read; the
    # memory store, which has no server, a data: URL.
    if backend.hub is not None:
        head = backend.hub.head(REPO_ID)
        assert url == f"{backend.hub.url}/datasets/{REPO_ID}/resolve/{head}/{quote(two[0].entry.path)}"
    else:
        assert url.startswith({"local": "file:///", "memory": "data:"}[backend.kind])
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == two[0].data


# ---- changing --------------------------------------------------------------------------------------


def test_update_applies_uploads_and_deletes_with_the_index(
    backend: Backend, two: tuple[Wheel, Wheel], tmp_path: Path
) -> None:
    a, b = two
    c = wheel(tmp_path, 3, sm="90")

    def swap(index: Index) -> tuple[Changes, None]:
        return Changes(
            index.with_entries(added=[c.entry], removed=[a.entry.path]), (c.upload,), (a.entry.path,), "swap"
        ), None

    applied = backend.open().update(swap, LAYOUT)
    assert [e.path for e in applied.changes.index.entries] == [b.entry.path, c.entry.path]
    index = assert_consistent(backend.open())
    assert index.entries == (b.entry, c.entry)
    files = paths_in(backend.open())
    assert (
        a.entry.path not in files and "pages/sm86-torch2.8-cu128.html" not in files
    )  # its page went with it
    assert "pages/sm90-torch2.8-cu128.html" in files
    backend.open().update(removing(b, c), LAYOUT)
    assert assert_consistent(backend.open()).entries == ()


def test_a_refusing_planner_changes_nothing(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    before = {f.path: f.size for f in backend.open().list_files().files}

    def refuse(index: Index) -> tuple[Changes, None]:
        raise Refused("no")

    with pytest.raises(Refused):
        backend.open().update(refuse, LAYOUT)
    assert {f.path: f.size for f in backend.open().list_files().files} == before


def test_a_change_that_changes_nothing_makes_no_change(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    head = backend.hub.head(REPO_ID) if backend.hub else None
    before = {f.path: f.size for f in backend.open().list_files().files}
    applied = backend.open().update(lambda index: (Changes(index), None), LAYOUT)
    assert applied.changes.empty and applied.commit == ""
    # The same wheels at the same paths again: the planner asks to upload them, the files stay as they are
    # (the local store writes the same bytes again; huggingface_hub drops a commit that changes no file).
    backend.open().update(adding(*two), LAYOUT)
    assert {f.path: f.size for f in backend.open().list_files().files} == before
    if backend.hub is not None:
        assert backend.hub.head(REPO_ID) == head


def test_planning_sees_the_current_index(backend: Backend, tmp_path: Path) -> None:
    a, b = wheel(tmp_path, 1), wheel(tmp_path, 2, sm="90")
    backend.open(create=True).update(adding(a), LAYOUT)
    slow = backend.open()
    assert read_index(slow, LAYOUT).entries == (a.entry,)  # this run has read the store...
    backend.open().update(adding(b), LAYOUT)  # ...and another run changes it meanwhile
    seen: list[Index] = []
    slow.update(adding(wheel(tmp_path, 3, sm="86"), seen=seen), LAYOUT)
    assert [e.path for e in seen[-1].entries] == [a.entry.path, b.entry.path]  # planned against the change
    assert len(assert_consistent(backend.open()).entries) == 3


def test_reads_after_an_update_see_it(backend: Backend, tmp_path: Path) -> None:
    store = backend.open(create=True)
    w = wheel(tmp_path, 1)
    store.update(adding(w), LAYOUT)
    assert read_index(store, LAYOUT).entries == (w.entry,)


# ---- capabilities: each store has those it really has ------------------------------------------------


def test_each_store_has_the_capabilities_it_really_has(backend: Backend) -> None:
    store = backend.open()
    has = {cap.__name__ for cap in (Stages, UploadStorage, LocalFiles) if isinstance(store, cap)}
    # The local store stages into its tree and its files are here; the Hub stages by commit and keeps
    # LFS objects beyond its tree; the memory store has the core alone.
    assert (
        has
        == {"local": {"Stages", "LocalFiles"}, "hub": {"Stages", "UploadStorage"}, "memory": set()}[
            backend.kind
        ]
    )


@pytest.mark.parametrize("backend", ["local", "hub"], indirect=True)
def test_stage_adds_files_and_leaves_the_index(
    backend: Backend, two: tuple[Wheel, Wheel], tmp_path: Path
) -> None:
    before = read_index(backend.open(), LAYOUT)
    c = wheel(tmp_path, 3, sm="90")
    pending = pending_path(c.entry)
    stager = backend.open()
    assert isinstance(stager, Stages)
    commit = stager.stage([c.upload], {pending: render_pending(c.entry)}, "stage")
    # On purpose: the Hub names the commit it made; a directory makes none.
    assert commit.startswith(f"{backend.hub.url}/datasets/{REPO_ID}/commit/") if backend.hub else commit == ""
    store = backend.open()
    assert read_index(store, LAYOUT) == before
    assert {c.entry.path, pending} <= paths_in(store)
    assert store.read_file(pending) == render_pending(c.entry)
    assert_consistent(store)


@pytest.mark.parametrize("backend", ["hub"], indirect=True)
def test_stage_blobs_then_commit_them_by_reference(
    backend: Backend, two: tuple[Wheel, Wheel], tmp_path: Path
) -> None:
    assert backend.hub is not None
    c = wheel(tmp_path, 3, sm="90")
    blob = Blob(c.entry.sha256, c.entry.size, c.entry.path)
    storage = backend.open()
    assert isinstance(storage, UploadStorage)
    assert storage.missing_blobs([blob]) == (blob,)
    head = storage.stage_blobs([c.upload])
    # The head it planned against; the bytes wait outside the tree (an LFS object, no commit).
    assert head == backend.hub.head(REPO_ID)
    assert c.entry.path not in paths_in(backend.open())
    assert storage.missing_blobs([blob]) == ()
    # Content by sha256, wherever it will be filed.
    elsewhere = Blob(c.entry.sha256, c.entry.size, "kern/sm80/torch2.8-cu128/" + c.entry.filename)
    assert storage.missing_blobs([elsewhere]) == ()
    by_reference = Upload(c.entry.path, None, c.entry.sha256, c.entry.size)
    backend.open().update(
        lambda index: (Changes(index.with_entries(added=[c.entry]), (by_reference,), (), "land"), None),
        LAYOUT,
    )
    store = backend.open()
    assert assert_consistent(store).by_path()[c.entry.path] == c.entry
    assert store.fetch(c.entry.path, tmp_path / "got.whl").read_bytes() == c.data


@pytest.mark.parametrize("backend", ["hub"], indirect=True)
def test_purgeable_and_purge(backend: Backend, two: tuple[Wheel, Wheel]) -> None:
    a, b = two
    sha = a.entry.sha256
    storage = backend.open()
    assert isinstance(storage, UploadStorage)
    # Still referenced at the head: nothing to purge, unless its last path is about to go.
    assert storage.purgeable() == ()
    leaving = storage.purgeable(leaving=[a.entry.path])
    backend.open().update(removing(a), LAYOUT)
    assert storage.purgeable(grace=3600) == ()  # stored just now: inside the grace window
    gone = storage.purgeable()
    # The Hub keeps a deleted file's LFS object in the history until purged.
    assert [x.sha256 for x in leaving] == [sha] and [x.sha256 for x in gone] == [sha]
    assert gone[0].size == a.entry.size
    storage.purge(gone)
    assert storage.purgeable() == ()
    store = backend.open()
    assert assert_consistent(store).entries == (b.entry,)
    assert store.read_file(b.entry.path) == b.data


# ---- where the stores differ, not on purpose (strict xfail: each turns into a failure once fixed) ------


@pytest.mark.parametrize("path", ["../outside", "/abs", "a//b", "kern/../index.json"])
def test_an_unsafe_path_is_refused(
    backend: Backend, two: tuple[Wheel, Wheel], path: str, request: pytest.FixtureRequest
) -> None:
    # The Hub store once answered index.json's bytes for "kern/../index.json": the HTTP client normalises it.
    with pytest.raises(BadInput, match="path"):
        backend.open().read_file(path)


def test_a_rebuild_restores_a_lost_generated_file(
    backend: Backend, two: tuple[Wheel, Wheel], request: pytest.FixtureRequest
) -> None:
    page = "pages/sm86-torch2.8-cu128.html"
    if backend.hub is not None:
        HfApi().delete_file(page, REPO_ID, repo_type="dataset")
    elif backend.memory is not None:
        del backend.memory.files[page]
    else:
        (Path(backend.open().location) / page).unlink()
    assert page not in paths_in(backend.open())
    backend.open().update(lambda index: (Changes(index, rebuild=True), None), LAYOUT)
    assert page in paths_in(backend.open())


# ---- the ops on a store that has the core alone ----------------------------------------------------------


def test_the_ops_work_on_a_store_with_the_core_alone(tmp_path: Path) -> None:
    """publish, pull, verify and gc need nothing beyond the core; staging says plainly it cannot."""
    tree = MemoryTree()
    store = MemoryStore(tree, create=True)
    src = make_wheel(
        tmp_path / "dist", "kern", "1.0", "cp311-cp311-linux_x86_64", {"kern/__init__.py": b"X = 1\n"}
    )
    label, sm = Label.parse("cu128torch2.8"), GpuArch.parse("89")
    options = PublishOptions(label=label, sms=(sm,), layout=LAYOUT)
    refused = "memory:house: a memory store cannot stage wheels; publish without "
    with pytest.raises(BadInput, match=f"^{refused}--stage$"):
        publish(store, [src], options, stage=True)
    with pytest.raises(BadInput, match=f"^{refused}--stage --manifest$"):
        publish(store, [src], options, stage=True, manifest=tmp_path / "m.json")
    assert tree.files == {} and not (tmp_path / "m.json").exists()
    plan = publish(store, [src], options)
    assert [f.action for f in plan.filings] == ["add"]
    path = f"kern/sm89/torch2.8-cu128/kern-1.0+{label}-cp311-cp311-linux_x86_64.whl"
    assert path in tree.files and f"{path}.metadata" in tree.files

    machine = Machine().with_overrides(
        sm="89", torch="2.8", cuda="12.8", python="3.11", platform="linux_x86_64"
    )
    pulled = pull(MemoryStore(tree), LAYOUT, ["kern"], Wants.of(machine), tmp_path / "pulled")
    assert [p.read_bytes() for p in pulled.files] == [tree.files[path]]
    for deep in (False, True):
        report = verify(MemoryStore(tree), LAYOUT, deep=deep)
        assert report.wheels == 1 and report.problems == (), report.render()
    gone = gc(
        MemoryStore(tree), LAYOUT, GcPolicy(drop_torch=((2, 8),)), act=True, purge=True, allow_empty=True
    )
    assert gone.purge == () and [r.entry.path for r in gone.removals] == [path]  # no upload storage to free
    assert path not in tree.files and verify(MemoryStore(tree), LAYOUT).problems == ()
