"""Opening files that may be hostile: only regular files are read, and links can be refused. Stdlib only.

A FIFO, a device (``/dev/zero``) or a socket where a wheel or an index file should be would hang a read
or never end it, so every file librarian reads from a store or a wheel path is opened without blocking
and checked with ``fstat`` before a byte is read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


class NotRegular(OSError):
    """The path is not a regular file (a FIFO, device, socket, folder or, with ``follow=False``, a link)."""


def user_config_file(name: str, variable: str, environ: Mapping[str, str] | None = None) -> Path:
    """A user's override file: ``$variable`` where set, else ``$XDG_CONFIG_HOME/librarian/<name>`` (the XDG
    spec says a relative or empty ``XDG_CONFIG_HOME`` is to be ignored: then ``~/.config``)."""
    env = os.environ if environ is None else environ
    if env.get(variable):
        return Path(env[variable])
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "librarian" / name


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """librarian's cache folder on this machine: ``$LIBRARIAN_CACHE``, else ``$XDG_CACHE_HOME/librarian``
    (``~/.cache/librarian``; a relative ``XDG_CACHE_HOME`` is ignored, as the XDG spec says)."""
    env = os.environ if environ is None else environ
    if env.get("LIBRARIAN_CACHE"):
        return Path(env["LIBRARIAN_CACHE"])
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "librarian"


def input_problem(path: Path) -> str | None:
    """Why ``path`` is no file a command can read as its input (``no such file``, ``a FIFO, not a file``),
    or None: said by what it is, before anything opens it (a FIFO would block the open or the read)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "no such file"
    return None if stat.S_ISREG(mode) else f"{kind(mode)}, not a file"


def kind(mode: int) -> str:
    """What a file of ``st_mode`` is, in words: ``a FIFO``, ``a device``, ..."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def open_regular(path: Path, *, follow: bool = True) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file; :class:`NotRegular` (an OSError) if not.

    The open does not block (a FIFO with no writer would), and with ``follow=False`` a symbolic link as
    the last component is refused rather than followed.
    """
    flags = os.O_RDONLY | _NONBLOCK | _BINARY | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise NotRegular(
                errno.ELOOP, "a symbolic link (librarian does not follow links in a store)", str(path)
            ) from e
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, f"{kind(mode)}, not a regular file", str(path))
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return open(path, "rb", opener=lambda _path, _flags: fd)  # the fd checked above; ``name`` the path
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int, *, follow: bool = True) -> bytes:
    """A regular file's bytes, refusing past ``limit`` bytes (:class:`NotRegular` or ``OSError``)."""
    with open_regular(path, follow=follow) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:  # said by its size, before a byte is read
            raise OSError(errno.EFBIG, f"{size} bytes, over the {limit}-byte limit", str(path))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"over {limit} bytes, too big to read whole", str(path))
    return data


def sha256_file(path: Path, chunk: int = 1 << 20, on_chunk: Callable[[int], object] | None = None) -> str:
    """The sha256 of a regular file as hex, read in chunks (``on_chunk`` hears each chunk's size: a bar)."""
    with open_regular(path) as f:
        return sha256_stream(f, chunk, on_chunk)


def sha256_stream(f: BinaryIO, chunk: int = 1 << 20, on_chunk: Callable[[int], object] | None = None) -> str:
    """The sha256 of what is left to read in ``f``, as hex, read in chunks."""
    h = hashlib.sha256()
    while data := f.read(chunk):
        h.update(data)
        if on_chunk is not None:
            on_chunk(len(data))
    return h.hexdigest()


TMP_PREFIX = ".librarian-tmp-"  # a store's listing knows files of this name as leftovers of a killed write


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A fresh temp name beside ``target`` (not created) for the caller to fill; renamed onto ``target`` when
    the block ends, removed if it raises. The one temp-then-rename of librarian: every writer goes through it.

    The name starts with :data:`TMP_PREFIX`, so a store's listing knows a killed write's leftover.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{TMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}-{target.name}")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_output(target: Path, mode: int | None = None, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A new file to write ``target``'s bytes into, renamed onto it on success (see :func:`atomic_path`).

    ``mode`` ``None``: the umask decides, as for any new file. ``durable``: flushed to disk before the rename,
    so that a crash leaves the old file or the new one (a store's files; not needed for a download).
    """
    with atomic_path(target) as tmp:
        # O_EXCL: the name is ours alone; os.open with a mode lets the umask apply.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as out:
            yield out
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # exactly ``mode``, whatever the umask


def atomic_write(
    target: Path, data: bytes | None = None, *, source: Path | None = None, mode: int = 0o644
) -> None:
    """Write ``data`` (or a copy of the regular file ``source``) to ``target``: a temp file beside it, flushed
    to disk, then renamed over it, so a reader sees the old file or the new one, never half of one."""
    with atomic_output(target, mode, durable=True) as out:
        if data is not None:
            out.write(data)
        elif source is not None:
            with open_regular(source) as src:
                shutil.copyfileobj(src, out, 1 << 20)
