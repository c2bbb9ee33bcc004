"""The local store's file-system primitives: the exclusive lock that serializes changes on one machine, and
hard links made atomically (a temp name, then a rename).

``flock`` on Linux and macOS; ``msvcrt.locking`` on Windows. The lock file is never followed if it is a
symbolic link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from librarian.errors import StoreError
from librarian.safeio import atomic_path

LOCK_NAME = ".librarian.lock"


def link_atomic(existing: Path, target: Path) -> bool:
    """Hard-link ``existing`` at ``target`` (temp name, then rename); False where links are not possible."""
    try:
        with atomic_path(target) as tmp:
            os.link(existing, tmp)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the store at ``root`` exclusively (``.librarian.lock``), made if it is not there."""
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise StoreError(f"{lock}: cannot open the lock ({e.strerror}; a symbolic link is refused)") from e
    with os.fdopen(fd, "r+b") as handle:
        lock_exclusively(handle.fileno(), sys.platform)
        yield


def lock_exclusively(fd: int, platform: str) -> None:
    """Hold the lock file exclusively until it is closed: ``flock`` on Linux and macOS, ``msvcrt.locking``
    (its first byte) on Windows, where ``LK_LOCK`` gives up after ten tries a second apart: tried again."""
    if platform != "win32":
        import fcntl  # POSIX only: imported where it exists (not a layering dodge)

        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    import msvcrt  # Windows only

    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
            return
        except OSError as e:
            if getattr(e, "errno", None) not in (errno.EDEADLK, errno.EACCES):
                raise StoreError(f"cannot lock the store ({e.strerror or e})") from e
