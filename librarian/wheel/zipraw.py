"""Raw zip I/O: members' compressed bytes read and written as they are, never recompressed.

``zipfile`` reads the central directory; this module finds each member's data behind its local header
and inflates it in bounded chunks. Writing an archive from raw bytes is :mod:`librarian.wheel.zipwriter`.
Format reference: https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT
Errors are :class:`ZipError` (``<member>: <problem>``); the caller adds the archive's name.

The one zip-bomb policy lives here. Every inflate (:class:`Inflater`, :func:`inflate_whole`) stops at the
member's declared size, so a streaming reader (RECORD check, retag) never holds or writes more than the
central directory promised. A reader that keeps a whole member (inspection: in memory, or spooled to a
temporary file) first asks :func:`bomb_problem`: a declared size past :data:`MAX_MEMBER`, or a ratio past
:data:`MAX_RATIO`, is refused before a byte is inflated.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NamedTuple

from librarian.wheel.inflate import engine

CHUNK = 1 << 20
_FEED = 256 << 10  # raw bytes per inflate call: well under CHUNK once inflated, for most members
_WINDOW = 64 << 10  # bytes of the archive read at once to find local headers

LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
LOCAL_SIG = 0x04034B50
FLAG_ENCRYPTED, FLAG_DESCRIPTOR, FLAG_UTF8 = 0x1, 0x8, 0x800
SUPPORTED_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_DRIVE = re.compile(r"[A-Za-z]:")
MAX_MEMBER = 16 << 30  # declared inflated size of one member kept whole: no real .so comes near
# Inflated / compressed, for a member kept whole; real .so files stay far below (zeros would not).
MAX_RATIO = 200


class ZipError(ValueError):
    """A member's bytes disagree with the central directory, or cannot be inflated."""


def bomb_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a member is not to be inflated whole (its declared size or its ratio), or None; checked before
    a byte is inflated, by every reader that keeps a whole member."""
    if info.file_size > MAX_MEMBER:
        return f"declares {info.file_size} bytes, over the {MAX_MEMBER}-byte cap"
    if info.file_size > MAX_RATIO * max(info.compress_size, 1) and info.file_size > CHUNK:
        return f"compresses {info.file_size // max(info.compress_size, 1)}:1 (zip bomb?)"
    return None


def name_bytes(info: zipfile.ZipInfo, name: str | None = None) -> bytes:
    """``name`` (default: the member's own) encoded as the member's flags say (UTF-8 flag, else cp437)."""
    text = info.orig_filename if name is None else name
    if text.isascii():  # most names: cp437 and UTF-8 agree, and the ascii codec is C, cp437's is not
        return text.encode("ascii")
    return text.encode("utf-8" if info.flag_bits & FLAG_UTF8 else "cp437")


def data_offset(f: BinaryIO, info: zipfile.ZipInfo) -> int:
    """Where ``info``'s compressed bytes start, after checking its local header agrees on the name."""
    return _Window(lambda size, at: _read_seek(f, size, at)).offset(info)


def _read_seek(f: BinaryIO, size: int, at: int) -> bytes:
    f.seek(at)
    return f.read(size)


class _Window:
    """Local headers read a window at a time (``read(size, offset)``): members in file order (70,000 small
    ones) cost one read per :data:`_WINDOW` bytes, not one each."""

    def __init__(self, read: Callable[[int, int], bytes]) -> None:
        self.read, self.start, self.buf = read, 0, b""

    def offset(self, info: zipfile.ZipInfo) -> int:
        """:func:`data_offset`, from the window (read anew where the header is not inside it)."""
        name = name_bytes(info)
        at, need = info.header_offset, LOCAL_HEADER.size + len(name)
        rel = at - self.start
        if rel < 0 or rel + need > len(self.buf):
            self.buf, self.start, rel = self.read(max(_WINDOW, need), at), at, 0
        if rel + LOCAL_HEADER.size > len(self.buf) or LOCAL_HEADER.unpack_from(self.buf, rel)[0] != LOCAL_SIG:
            raise ZipError(f"{info.orig_filename}: no local header at offset {at}")
        name_len: int
        extra_len: int
        name_len, extra_len = LOCAL_HEADER.unpack_from(self.buf, rel)[-2:]
        if name_len != len(name) or self.buf[rel + LOCAL_HEADER.size : rel + need] != name:
            raise ZipError(f"{info.orig_filename}: local header names another member")
        return at + LOCAL_HEADER.size + name_len + extra_len


def data_offsets(f: BinaryIO, infos: list[zipfile.ZipInfo]) -> dict[str, int]:
    """Each member's data offset; members whose data overlap (a zip-bomb trick) are refused."""
    try:
        fd = f.fileno() if hasattr(os, "pread") else None
    except (OSError, io.UnsupportedOperation):  # not a file: BytesIO
        fd = None
    window = _Window(lambda size, at: _read_seek(f, size, at) if fd is None else os.pread(fd, size, at))
    offsets = {i.orig_filename: window.offset(i) for i in infos}
    spans = sorted(
        (i.header_offset, offsets[i.orig_filename] + i.compress_size, i.orig_filename) for i in infos
    )
    for (_, end, member), (start, _, following) in itertools.pairwise(spans):
        if end > start:
            raise ZipError(f"{member}: data overlaps {following}")
    return offsets


def unsafe_name(name: str) -> str | None:
    """Why a member name could write outside the folder it is extracted into, or None if it cannot."""
    # Most names are cleared by substring tests, at C speed (a regex over flashinfer-cubin's 16,000 names
    # of ~200 characters, read three times, cost half a second).
    if (
        name
        and name[0] not in "/."
        and "//" not in name
        and "/." not in name
        and "\\" not in name
        and "\x00" not in name
        and not _DRIVE.match(name)
    ):
        return None
    if "\\" in name or "\x00" in name:
        return "backslash or NUL in the name"
    if name.startswith("/") or _DRIVE.match(name):
        return "absolute path"
    path = name.removesuffix("/")
    # Only a name with an empty, "." or ".." segment can be one; most have no "//", "/." or leading ".".
    suspect = not path or path.startswith(".") or path.endswith("/") or "//" in path or "/." in path
    if suspect and any(part in {"", ".", ".."} for part in path.split("/")):
        return "'..', '.' or empty path segment"
    return None


def iter_raw(f: BinaryIO, start: int, size: int) -> Iterator[bytes]:
    """``size`` bytes from ``start`` in chunks; short reads mean the archive is truncated."""
    f.seek(start)
    left = size
    while left:
        chunk = f.read(min(CHUNK, left))
        if not chunk:
            raise ZipError(f"offset {start}: archive ends inside member data")
        left -= len(chunk)
        yield chunk


def iter_raw_at(fd: int, start: int, size: int) -> Iterator[bytes]:
    """As :func:`iter_raw`, by ``os.pread`` on ``fd``: no shared file position, so safe from any thread."""
    left, at = size, start
    while left:
        chunk = os.pread(fd, min(CHUNK, left), at)
        if not chunk:
            raise ZipError(f"offset {start}: archive ends inside member data")
        left -= len(chunk)
        at += len(chunk)
        yield chunk


class Inflater:
    """Feed a member's raw bytes, get its plain bytes in chunks of at most :data:`CHUNK`.

    Output past the declared size raises at once (a bomb never fills memory or disk); :meth:`finish`
    checks the stream ended, the size and the CRC.
    """

    def __init__(self, info: zipfile.ZipInfo) -> None:
        self._info = info
        self._engine = engine()
        self._zlib = (
            self._engine.decompressobj(-zlib.MAX_WBITS)
            if info.compress_type == zipfile.ZIP_DEFLATED
            else None
        )
        self._size = 0
        self._crc = 0

    def _count(self, plain: bytes) -> bytes:
        self._size += len(plain)
        if self._size > self._info.file_size:
            raise ZipError(
                f"{self._info.orig_filename}: inflates past its declared {self._info.file_size} bytes"
            )
        self._crc = self._engine.crc32(plain, self._crc)
        return plain

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The plain bytes ``raw`` inflates to, in bounded chunks."""
        if self._zlib is None:
            yield self._count(raw)
            return
        view = memoryview(raw)
        try:
            for at in range(0, len(view), _FEED):
                # Fed in pieces that inflate to less than CHUNK: each call then takes its whole input, where
                # a bigger piece leaves an ``unconsumed_tail``, a copy of the rest, at every call (cupy's
                # 75 MB .so: 0.40 s to 0.33 s with ISA-L).
                piece: bytes | memoryview = view[at : at + _FEED]
                while piece:
                    yield self._count(self._zlib.decompress(piece, CHUNK))
                    piece = self._zlib.unconsumed_tail
        except self._engine.errors as e:
            raise ZipError(f"{self._info.orig_filename}: bad deflate data ({e})") from e

    def finish(self) -> Iterator[bytes]:
        """Any plain bytes still held back, then the end-of-member checks."""
        if self._zlib is not None:
            # With max_length, zlib may hold output back after the last input: drain it, still bounded.
            while plain := self._zlib.decompress(b"", CHUNK):
                yield self._count(plain)
            if not self._zlib.eof:
                raise ZipError(f"{self._info.orig_filename}: deflate stream is truncated")
        if self._size != self._info.file_size:
            raise ZipError(
                f"{self._info.orig_filename}: {self._size} bytes, central directory says "
                f"{self._info.file_size}"
            )
        if self._crc != self._info.CRC:
            raise ZipError(f"{self._info.orig_filename}: bad CRC-32")


def inflate_whole(info: zipfile.ZipInfo, raw: bytes) -> bytes:
    """A small member's plain bytes from all its raw bytes at once, with :class:`Inflater`'s checks and
    messages (70,000 small members: one call each, not a generator chain)."""
    name = info.orig_filename
    chosen = engine()
    if info.compress_type == zipfile.ZIP_DEFLATED:
        inflater = chosen.decompressobj(-zlib.MAX_WBITS)
        try:
            # One byte past the declared size: a liar.
            plain: bytes = inflater.decompress(raw, info.file_size + 1)
        except chosen.errors as e:
            raise ZipError(f"{name}: bad deflate data ({e})") from e
        if len(plain) > info.file_size:
            raise ZipError(f"{name}: inflates past its declared {info.file_size} bytes")
        if not inflater.eof:
            raise ZipError(f"{name}: deflate stream is truncated")
    elif len(raw) > info.file_size:
        raise ZipError(f"{name}: inflates past its declared {info.file_size} bytes")
    else:
        plain = raw
    if len(plain) != info.file_size:
        raise ZipError(f"{name}: {len(plain)} bytes, central directory says {info.file_size}")
    if chosen.crc32(plain, 0) != info.CRC:
        raise ZipError(f"{name}: bad CRC-32")
    return plain


def read_at(fd: int, start: int, size: int) -> bytes:
    """``size`` bytes from ``start`` by one ``pread``; short means the archive is truncated."""
    data = os.pread(fd, size, start)
    if len(data) != size:
        raise ZipError(f"offset {start}: archive ends inside member data")
    return data


def iter_plain(f: BinaryIO, info: zipfile.ZipInfo, start: int) -> Iterator[bytes]:
    """The member's uncompressed bytes (data at ``start``) in bounded chunks, size and CRC checked at the end."""
    return _plain(info, iter_raw(f, start, info.compress_size))


def iter_plain_at(fd: int, info: zipfile.ZipInfo, start: int) -> Iterator[bytes]:
    """As :func:`iter_plain`, by ``os.pread`` on ``fd``: safe from any thread."""
    return _plain(info, iter_raw_at(fd, start, info.compress_size))


def _plain(info: zipfile.ZipInfo, raws: Iterable[bytes]) -> Iterator[bytes]:
    inflater = Inflater(info)
    for raw in raws:
        yield from inflater.feed(raw)
    yield from inflater.finish()


class Directory(NamedTuple):
    """An archive's members as its central directory lists them, and where each one's data starts."""

    infos: list[zipfile.ZipInfo]
    offsets: dict[str, int]
