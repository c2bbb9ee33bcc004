"""The local store: a directory (``./wheelhouse`` by default) that works offline.

Changes are made under an exclusive lock (``.librarian.lock``) so concurrent publishers on one machine
serialize. Every file is written to a temp name beside its target and renamed; the index goes last, so
a crash leaves at worst stored files the index does not list yet (``verify`` reports them; the next
publish of the same wheels repairs it). The same bytes filed in several cells are hard-linked.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from librarian.catalogue import render_catalogue
from librarian.errors import StoreError
from librarian.index import ROOT
from librarian.layout import Layout, check_store_path
from librarian.stores.base import Applied, Blob, Changes, Listing, Planner, StoredFile, Upload, read_index

log = logging.getLogger(__name__)

LOCK_NAME = ".librarian.lock"
_TMP_PREFIX = ".librarian-tmp-"


def _write_atomic(target: Path, data: bytes | None = None, source: Path | None = None) -> None:
    """Write ``data`` (or a copy of ``source``) to ``target`` through a temp file and a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            if data is not None:
                out.write(data)
            elif source is not None:
                with source.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _link_atomic(existing: Path, target: Path) -> bool:
    """Hard-link ``existing`` at ``target`` (temp name, then rename); False where links are not possible."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{_TMP_PREFIX}{os.getpid()}-{target.name}"
    try:
        os.link(existing, tmp)
    except OSError:
        return False
    os.replace(tmp, target)
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / LOCK_NAME).open("a+b") as handle:
        if sys.platform != "win32":
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


class LocalStore:
    """A store in a directory on this machine."""

    def __init__(self, root: Path, *, may_create: bool = False) -> None:
        self.root = root
        self.may_create = may_create  # publish makes a new store; every other command needs one

    def _exists(self) -> bool:
        """Whether the store is there; raises StoreError (exit 2) when it is not and may not be made."""
        if self.root.is_dir():
            return True
        if self.root.exists():
            raise StoreError(f"{self.root}: not a directory, so not a store")
        if self.may_create:
            return False
        raise StoreError(f"{self.root}: no such store (a directory that 'librarian publish' makes)")

    @property
    def location(self) -> str:
        """The directory, as the user named it."""
        return str(self.root)

    def _resolve(self, path: str) -> Path:
        check_store_path(path)
        return self.root / path

    def read_file(self, path: str) -> bytes | None:
        """A file's bytes, or ``None`` if absent."""
        if not self._exists():
            return None
        try:
            return self._resolve(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"{self.root / path}: cannot read ({e.strerror})") from e

    def list_files(self) -> Listing:
        """Every file under the root, except the lock and temp files."""
        if not self._exists():
            return Listing(())
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name == LOCK_NAME or name.startswith(_TMP_PREFIX):
                    continue
                full = Path(dirpath) / name
                rel = full.relative_to(self.root).as_posix()
                files.append(StoredFile(rel, full.stat().st_size))
        return Listing(tuple(files))

    def fetch(self, path: str, dest: Path) -> Path:
        """Copy a stored file to ``dest``."""
        self._exists()
        source = self._resolve(path)
        if not source.is_file():
            raise StoreError(f"{source}: not in the store")
        _write_atomic(dest, source=source)
        return dest

    def local_path(self, path: str) -> Path | None:
        """The stored file itself."""
        return self._resolve(path)

    def update(self, plan: Planner, default_layout: Layout) -> Applied:
        """Plan under the lock and apply: wheels first, deletions, then the catalogue with the root last."""
        self._exists()
        with _locked(self.root):
            old = read_index(self, default_layout)
            changes = plan(old)
            if changes.empty and changes.index == old:
                return Applied(changes, str(self.root))
            self._apply(changes, render_catalogue(old))
        return Applied(changes, str(self.root))

    def stage(self, uploads: Sequence[Upload], files: Mapping[str, bytes], message: str) -> str:
        """Write wheels, then the small files that describe them (pending entries); the index is not touched."""
        with _locked(self.root):
            self._write_uploads(uploads, {})
            for path, data in sorted(files.items()):
                _write_atomic(self._resolve(path), data=data)
        log.info("%s: %s", self.root, message)
        return str(self.root)

    def stage_blobs(self, uploads: Sequence[Upload]) -> str:
        """Write the wheels at their paths (no index change): a directory has no other place for bytes."""
        self.stage(uploads, {}, "staged")
        return ""

    def missing_blobs(self, blobs: Sequence[Blob]) -> tuple[Blob, ...]:
        """Those of ``blobs`` whose path (``Blob.name``) does not hold a file of that size and sha256."""
        missing = []
        for blob in blobs:
            target = self._resolve(blob.name)
            if not target.is_file() or target.stat().st_size != blob.size or _sha256(target) != blob.sha256:
                missing.append(blob)
        return tuple(missing)

    def purgeable(self, sha256s: Iterable[str], leaving: Iterable[str] = ()) -> tuple[Blob, ...]:
        """None: deleting a file (its last hard link) frees its space already."""
        return ()

    def purge(self, blobs: Sequence[Blob]) -> None:
        """Nothing to do (see ``purgeable``)."""

    def _write_uploads(self, uploads: Sequence[Upload], by_sha: dict[str, Path]) -> None:
        for upload in sorted(uploads, key=lambda u: u.path):
            target = self._resolve(upload.path)
            if upload.source is None:  # staged earlier (stage_blobs): the file is in place already
                if not target.is_file():
                    raise StoreError(f"{target}: staged wheel is not in the store")
                by_sha.setdefault(upload.sha256, target)
                continue
            existing = by_sha.get(upload.sha256)
            if existing is None or existing == target or not _link_atomic(existing, target):
                _write_atomic(target, source=upload.source)
            by_sha.setdefault(upload.sha256, target)

    def _apply(self, changes: Changes, old_catalogue: dict[str, bytes]) -> None:
        by_sha: dict[str, Path] = {}
        for entry in changes.index.entries:
            target = self.root / entry.path
            if entry.sha256 not in by_sha and target.is_file():
                by_sha[entry.sha256] = target
        self._write_uploads(changes.uploads, by_sha)
        for path in changes.deletes:
            target = self._resolve(path)
            target.unlink(missing_ok=True)
            self._prune_empty_dirs(target.parent)
        new_catalogue = render_catalogue(changes.index)
        for path in sorted(set(old_catalogue) - set(new_catalogue)):
            target = self._resolve(path)
            target.unlink(missing_ok=True)
            self._prune_empty_dirs(target.parent)
        # The root index last: until it is renamed into place, readers see the old, consistent state.
        for path, data in sorted(new_catalogue.items(), key=lambda kv: kv[0] == ROOT):
            target = self._resolve(path)
            if old_catalogue.get(path) != data or not target.is_file():
                _write_atomic(target, data=data)

    def _prune_empty_dirs(self, directory: Path) -> None:
        while directory != self.root and directory.is_relative_to(self.root):
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent
