"""A store held in memory that implements the core of the store contract and nothing else.

It is the proof of what ``librarian/stores/base.py`` says a new store must implement: the contract suite
runs every core case on it as on the local and Hub stores, and the ops that need a capability it lacks
(staging, upload storage, local files) do without it or say plainly that it cannot. One module, one
class, no librarian module changed to let it in.
"""

from __future__ import annotations

import base64
import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from librarian.errors import StoreError
from librarian.generated import plan_generated
from librarian.layout import Layout, check_store_path
from librarian.safeio import atomic_write
from librarian.stores.base import (
    Applied,
    Listing,
    Planner,
    R,
    StoredFile,
    generated_in_tree,
    nothing_to_do,
    read_index,
)


@dataclass
class MemoryTree:
    """What the store holds, shared by every store object opened on it (as a directory is)."""

    files: dict[str, bytes] = field(default_factory=dict)
    exists: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class MemoryStore:
    """The core members of :class:`~librarian.stores.base.Store`, over a :class:`MemoryTree`."""

    def __init__(self, tree: MemoryTree, name: str = "house", *, create: bool = False) -> None:
        self.tree, self.name, self.create = tree, name, create

    @property
    def kind(self) -> str:
        return "memory"

    @property
    def location(self) -> str:
        return f"memory:{self.name}"

    @property
    def revision(self) -> str:
        return ""

    def _there(self) -> bool:
        if self.tree.exists:
            return True
        if self.create:
            return False
        raise StoreError(f"{self.location}: no such store")

    def _bytes(self, path: str) -> bytes:
        check_store_path(path)
        self._there()
        data = self.tree.files.get(path)
        if data is None:
            raise StoreError(f"{self.location}/{path}: not in the store")
        return data

    def read_file(self, path: str) -> bytes | None:
        check_store_path(path)
        return self.tree.files.get(path) if self._there() else None

    def list_files(self) -> Listing:
        if not self._there():
            return Listing(())
        return Listing(tuple(StoredFile(p, len(d)) for p, d in sorted(self.tree.files.items())))

    @contextlib.contextmanager
    def open(self, path: str) -> Iterator[BinaryIO]:
        data = self._bytes(path)
        fd, name = tempfile.mkstemp(prefix="memory-store-")
        os.close(fd)
        try:
            with open(name, "w+b") as f:  # by name: its ``name`` is the path, as the contract says
                f.write(data)
                f.seek(0)
                yield f
        finally:
            os.unlink(name)

    def fetch(self, path: str, dest: Path, sha256: str | None = None) -> Path:
        atomic_write(dest, self._bytes(path))
        return dest

    def url_for(self, path: str) -> str:
        # A data: URL: what urllib (and so this suite) can fetch from a store that has no server.
        return "data:application/octet-stream;base64," + base64.b64encode(self._bytes(path)).decode()

    def update(self, plan: Planner[R], default_layout: Layout) -> Applied[R]:
        with self.tree.lock:
            self._there()
            old = read_index(self, default_layout)
            changes, result = plan(old)
            if nothing_to_do(old, changes):
                return Applied(changes, result, self.location)
            tree = generated_in_tree(self, changes.index, changes.deletes) if changes.rebuild else None
            generated = plan_generated(old, changes.index, tree=tree)
            files = dict(self.tree.files)
            for upload in changes.uploads:
                check_store_path(upload.path)
                if upload.source is None:  # bytes uploaded earlier: this store has no upload storage
                    raise StoreError(
                        f"{self.location}/{upload.path}: no bytes to file (nothing is staged here)"
                    )
                files[upload.path] = upload.source.read_bytes()
            files.update(generated.writes)
            for path in (*changes.deletes, *generated.deletes):
                files.pop(path, None)
            self.tree.files, self.tree.exists = files, True  # the whole change at once
        return Applied(changes, result, self.location)
