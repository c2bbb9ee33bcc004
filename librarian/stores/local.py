"""The local store: a directory (``./wheelhouse`` by default) that works offline.

Changes are made under an exclusive lock (``.librarian.lock``) so concurrent publishers on one machine
serialize. Every file is written to a temp name beside its target and renamed. The order keeps every
moment readable: a journal of the change first (``.librarian-journal.json``), then new wheels, then the
generated files with the root ``index.json`` last, then the wheels the change removes, then the journal
goes. So the index never lists a wheel that is not there yet or no longer there, and a change killed
half-way is finished by the next change under the lock (or ``reindex``), which also sweeps the temp
files it left. The same bytes filed in several cells are hard-linked.

The store never follows a symbolic link below its root, and reads only regular files: a link, FIFO or
device in the tree is listed as a stray (``verify`` reports it), and a change that would pass through
one is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from librarian.catalogue import catalogue_paths
from librarian.errors import StoreError
from librarian.index import Index, IndexEntry, metadata_path
from librarian.index_files import MAX_INDEX_BYTES, ROOT
from librarian.layout import Layout, check_store_path
from librarian.safeio import (
    TMP_PREFIX,
    atomic_output,
    atomic_write,
    kind,
    open_regular,
    read_regular,
    sha256_file,
)
from librarian.stores.base import (
    Applied,
    Changes,
    Listing,
    Planner,
    R,
    StoredFile,
    Upload,
    generated_in_tree,
    nothing_to_do,
    read_index,
)
from librarian.stores.local_journal import JOURNAL_NAME, Journal, parse_journal
from librarian.stores.local_lock import LOCK_NAME, link_atomic, locked

if TYPE_CHECKING:
    from librarian.generated import Generated

log = logging.getLogger(__name__)


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
        """``path`` under the root; StoreError if any part of it below the root is a symbolic link."""
        check_store_path(path)
        here = self.root
        for part in path.split("/"):
            here = here / part
            try:
                mode = here.lstat().st_mode
            except FileNotFoundError:
                break  # nothing further exists to be a link
            except OSError as e:
                raise StoreError(f"{here}: cannot read ({e.strerror})") from e
            if stat.S_ISLNK(mode):
                raise StoreError(
                    f"{here}: a symbolic link inside the store; librarian never follows links out of it "
                    "(replace it with a folder or a file)"
                )
        return self.root / path

    def read_file(self, path: str) -> bytes | None:
        """A small file's bytes, or ``None`` if absent; a link, FIFO or device is refused."""
        if not self._exists():
            return None
        target = self._resolve(path)
        try:
            return read_regular(target, MAX_INDEX_BYTES, follow=False)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"{target}: cannot read ({e.strerror or e})") from e

    def cached_file(self, path: str) -> bytes | None:
        """The file as it is on disk (the store is on this machine); ``None`` where it cannot be read."""
        try:
            return self.read_file(path) if self.root.is_dir() else None
        except StoreError:
            return None

    def list_files(self) -> Listing:
        """Every regular file under the root; links, FIFOs, devices, temp files and a journal are strays."""
        if not self._exists():
            return Listing(())
        return self._listing(self.root)

    def list_folder(self, folder: str) -> Listing:
        """The files under ``folder`` alone (none where there is no such folder), as :meth:`list_files` says them."""
        start = self._resolve(folder)
        if not self._exists() or not start.is_dir() or start.is_symlink():
            return Listing(())
        return self._listing(start)

    def _listing(self, start: Path) -> Listing:
        files: list[StoredFile] = []
        strays: list[tuple[str, str]] = []
        for dirpath, dirnames, filenames in os.walk(start):
            here = Path(dirpath)
            rel_dir = here.relative_to(self.root).as_posix()
            prefix = "" if rel_dir == "." else f"{rel_dir}/"
            kept = []
            for d in sorted(dirnames):
                if d.startswith("."):
                    continue
                if (here / d).is_symlink():  # os.walk lists links to folders here, without entering them
                    strays.append(
                        (prefix + d, "a symbolic link inside the store (librarian never follows it)")
                    )
                else:
                    kept.append(d)
            dirnames[:] = kept
            for name in sorted(filenames):
                if name == LOCK_NAME:
                    continue
                rel = prefix + name
                st = (here / name).lstat()
                if name.startswith(TMP_PREFIX):
                    strays.append(
                        (rel, "a temp file left by an interrupted change (the next change removes it)")
                    )
                elif name == JOURNAL_NAME:
                    why = "an interrupted change left its journal (reindex, or the next publish or gc, finishes it)"
                    strays.append((rel, why))
                elif not stat.S_ISREG(st.st_mode):
                    strays.append((rel, f"{kind(st.st_mode)}, not a regular file (never read)"))
                else:
                    files.append(StoredFile(rel, st.st_size))
        return Listing(tuple(files), strays=tuple(sorted(strays)))

    @property
    def kind(self) -> str:
        """``local``."""
        return "local"

    @property
    def revision(self) -> str:
        """``""``: a directory has no branches."""
        return ""

    def file_identity(self, path: str) -> tuple[int, int]:
        """The stored file's ``(device, inode)`` (its hard links share it); a link is not followed."""
        self._exists()
        target = self._resolve(path)
        try:
            st = target.lstat()
        except OSError as e:
            raise StoreError(f"{target}: not in the store ({e.strerror or e})") from e
        return st.st_dev, st.st_ino

    @contextlib.contextmanager
    def open(self, path: str) -> Iterator[BinaryIO]:
        """The stored file itself, opened without following a link; a FIFO or device is refused."""
        self._exists()
        source = self._resolve(path)
        try:
            f = open_regular(source, follow=False)
        except OSError as e:
            raise StoreError(f"{source}: not in the store ({e.strerror or e})") from e
        with f:
            yield f

    def fetch(self, path: str, dest: Path, sha256: str | None = None) -> Path:
        """Copy a stored file to ``dest`` (the store is on this machine: no cache to look in)."""
        # open refuses links and FIFOs
        with self.open(path) as stored, atomic_output(dest, 0o644, durable=True) as out:
            shutil.copyfileobj(stored, out, 1 << 20)
        return dest

    def url_for(self, path: str) -> str:
        """The stored file's ``file://`` URL (absolute)."""
        return self._resolve(path).absolute().as_uri()

    def update(self, plan: Planner[R], default_layout: Layout) -> Applied[R]:
        """Plan under the lock and apply: journal, wheels, catalogue with the root last, removals, journal gone."""
        self._exists()
        with locked(self.root):
            self._recover(default_layout)  # leaves the generated files rebuilt for the index it finishes
            self._sweep_temp_files(self.root, deep=False)  # a kill while writing the journal leaves one here
            old = read_index(self, default_layout)
            changes, result = plan(old)
            # A root out of step with the shards it was read from (a kill between them, by an older
            # librarian) is rebuilt by any change, even one that changes no wheel.
            rebuild = changes.rebuild or self._root_is_stale(old)
            if nothing_to_do(old, changes) and not rebuild:
                return Applied(changes, result, str(self.root))
            self._apply(old, changes, rebuild=rebuild)
        return Applied(changes, result, str(self.root))

    def stage(self, uploads: Sequence[Upload], files: Mapping[str, bytes], message: str) -> str:
        """Write wheels, then the small files that describe them (pending entries); the index is not touched."""
        with locked(self.root):
            for path in [*(u.path for u in uploads), *files]:
                self._resolve(path)
            # No index change: the journal marks temp files to sweep if killed.
            atomic_write(self.root / JOURNAL_NAME, Journal((), (), ()).to_bytes())
            self._write_uploads(uploads, {})
            for path, data in sorted(files.items()):
                atomic_write(self._resolve(path), data)
            (self.root / JOURNAL_NAME).unlink(missing_ok=True)
        log.info("%s: %s", self.root, message)
        return ""  # no commit: a directory has no history

    def _write_uploads(self, uploads: Sequence[Upload], by_sha: dict[str, Path]) -> None:
        for upload in sorted(uploads, key=lambda u: u.path):
            target = self._resolve(upload.path)
            if upload.source is None and upload.stored_at:  # a copy of a file the store holds (a refile)
                held = by_sha.get(upload.sha256) or self._resolve(upload.stored_at)
                if not link_atomic(held, target):
                    atomic_write(target, source=held)
                by_sha.setdefault(upload.sha256, target)
                continue
            if upload.source is None:  # staged earlier (stage_blobs): the file is in place already
                if not target.is_file():
                    raise StoreError(f"{target}: staged wheel is not in the store")
                by_sha.setdefault(upload.sha256, target)
                continue
            existing = by_sha.get(upload.sha256)
            if existing is None or existing == target or not link_atomic(existing, target):
                atomic_write(target, source=upload.source)
            by_sha.setdefault(upload.sha256, target)

    def _apply(self, old: Index, changes: Changes, *, rebuild: bool = False) -> None:
        # Every path is checked for links before the first byte is written: a refusal changes nothing.
        for path in [*(u.path for u in changes.uploads), *changes.deletes]:
            self._resolve(path)
        atomic_write(
            self.root / JOURNAL_NAME, Journal.of_change(old, changes.index, changes.deletes).to_bytes()
        )
        by_sha: dict[str, Path] = {}
        for entry in changes.index.entries:
            target = self.root / entry.path
            if entry.sha256 not in by_sha and target.is_file() and not target.is_symlink():
                by_sha[entry.sha256] = target
        self._write_uploads(changes.uploads, by_sha)
        self._write_catalogue(old, changes.index, rebuild)
        if rebuild:
            self._sweep_temp_files()
        # Removals last: until the index no longer lists a wheel, its file stays for readers.
        self._delete(changes.deletes)
        (self.root / JOURNAL_NAME).unlink(missing_ok=True)

    def _write_catalogue(self, old: Index, new: Index, rebuild: bool) -> None:
        """The generated files for ``new``, root last; then those ``new`` no longer renders are removed."""
        from librarian.generated import plan_generated  # here: a pull writes no page, card or index

        if rebuild:  # compare with the tree, not with what ``old`` renders (reindex's repair, a recovery)
            self._apply_generated(plan_generated(old, new, tree=generated_in_tree(self, new)))
        else:
            missing = {p for p in catalogue_paths(new) if not self._resolve(p).is_file()}
            self._apply_generated(plan_generated(old, new, missing=missing))

    def _apply_generated(self, generated: Generated) -> None:
        for path, data in generated.writes:  # the root index comes last
            atomic_write(self._resolve(path), data)
        self._delete(generated.deletes)

    def _root_is_stale(self, index: Index) -> bool:
        from librarian.generated import root_is_stale

        return root_is_stale(index, self.read_file(ROOT))

    def _delete(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                target = self._resolve(path)
            except StoreError as e:
                log.warning("%s", e)  # a link appeared since the check: leave it for verify to report
                continue
            target.unlink(missing_ok=True)
            self._prune_empty_dirs(target.parent)

    def _recover(self, default_layout: Layout) -> None:
        """Finish a change killed half-way (its journal is here) and sweep stale temp files."""
        journal = self.root / JOURNAL_NAME
        try:
            raw = read_regular(journal, MAX_INDEX_BYTES, follow=False)
        except FileNotFoundError:
            return
        except OSError as e:
            raise StoreError(f"{journal}: cannot read ({e.strerror or e})") from e
        change = parse_journal(raw, journal)
        old = read_index(self, default_layout)
        # A wheel whose PEP 658 file the kill left unwritten is kept, served without it (pip reads the
        # wheel then): the file is optional, the wheel is not.
        whole = [e for e in change.added if self._holds(e)]
        present = [e if self._holds_metadata(e) else replace(e, metadata_sha256=None) for e in whole]
        new = old.with_entries(added=present, removed=change.unlisted)
        self._write_catalogue(old, new, rebuild=True)
        # A file whose copies the change was making (a refiled wheel) stays until every copy is in place:
        # the kill left it unindexed, where 'reindex --adopt' finds it again.
        unmade = {(e.sha256, e.size) for e in change.added if e not in whole}
        self._delete(p for p in change.deletes if not self._is_one_of(p, unmade))
        self._sweep_temp_files()
        journal.unlink(missing_ok=True)
        log.warning(
            "%s: finished a change that was interrupted (%d entries kept, %d removed)",
            self.root,
            len(present),
            len(change.unlisted),
        )

    def drop_unfollowable_journal(self) -> str | None:
        """Remove a journal that cannot be followed (see :class:`~librarian.stores.base.Journals`)."""
        journal = self.root / JOURNAL_NAME
        if not self._exists():
            return None
        with locked(self.root):
            try:
                raw = read_regular(journal, MAX_INDEX_BYTES, follow=False)
            except FileNotFoundError:
                return None
            except OSError as e:
                why = f"cannot read ({e.strerror or e})"
            else:
                try:
                    parse_journal(raw, journal)
                    return None  # it can be followed: the next change finishes it
                except StoreError as e:
                    why = str(e).removeprefix(f"{journal}: ").split(";")[0]
            journal.unlink(missing_ok=True)
        return f"{journal}: dropped the journal of an interrupted change ({why})"

    def _is_one_of(self, path: str, wanted: set[tuple[str, int]]) -> bool:
        """Whether the file at ``path`` is a wheel of these (sha256, size) pairs."""
        return any(self._holds_file(path, sha, size) for sha, size in wanted)

    def _holds(self, entry: IndexEntry) -> bool:
        """Whether the wheel an interrupted change meant to add is in place, whole (size and sha256)."""
        return self._holds_file(entry.path, entry.sha256, entry.size)

    def _holds_metadata(self, entry: IndexEntry) -> bool:
        """Whether the entry's PEP 658 METADATA file, if it names one, is in place and whole."""
        sha = entry.metadata_sha256
        return not sha or self._holds_file(metadata_path(entry.path), sha, None)

    def _holds_file(self, path: str, sha256: str, size: int | None) -> bool:
        try:
            target = self._resolve(path)
            st = target.lstat()
            return stat.S_ISREG(st.st_mode) and size in (None, st.st_size) and sha256_file(target) == sha256
        except (OSError, StoreError):
            return False

    def _sweep_temp_files(self, top: Path | None = None, *, deep: bool = True) -> None:
        """Remove temp files under ``top`` (the root); under the lock, every one was left by a change that died."""
        for dirpath, dirnames, filenames in os.walk(top or self.root):
            dirnames[:] = [d for d in dirnames if deep and not (Path(dirpath) / d).is_symlink()]
            for name in filenames:
                if name.startswith(TMP_PREFIX):
                    (Path(dirpath) / name).unlink(missing_ok=True)

    def _prune_empty_dirs(self, directory: Path) -> None:
        while directory != self.root and directory.is_relative_to(self.root):
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent
