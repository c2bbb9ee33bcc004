"""Raw zip I/O: members' compressed bytes read and written as they are, never recompressed.

``zipfile`` reads the central directory; this module finds each member's data behind its local header,
inflates it in bounded chunks and writes a new archive from raw compressed bytes: local headers, data,
central directory, end records, with ZIP64 where sizes, offsets or counts need it.
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

CHUNK = 1 << 20
_WINDOW = 64 << 10  # bytes of the archive read at once to find local headers
# Past these, an entry or the archive needs ZIP64 records; module globals (as in zipfile) so a test can
# lower them and drive the ZIP64 path with small files.
ZIP64_LIMIT = 0xFFFFFFFF
ZIP_FILECOUNT_LIMIT = 0xFFFF

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_LOCATOR64 = struct.Struct("<IIQI")
_LOCAL_SIG, _CENTRAL_SIG = 0x04034B50, 0x02014B50
_EOCD_SIG, _EOCD64_SIG, _LOCATOR64_SIG = 0x06054B50, 0x06064B50, 0x07064B50
_ZIP64_EXTRA = 0x0001
_FLAG_ENCRYPTED, _FLAG_DESCRIPTOR, _FLAG_UTF8 = 0x1, 0x8, 0x800
SUPPORTED_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_DRIVE = re.compile(r"[A-Za-z]:")
# Every name unsafe_name could refuse matches this: a backslash or NUL, a leading "/" or ".", a drive,
# "//", "/." or nothing at all.
_SUSPECT = re.compile(r"[\\\x00]|^[/.]|^[A-Za-z]:|//|/\.|^$")
MAX_MEMBER = 16 << 30  # declared inflated size of one member kept whole: no real .so comes near
MAX_RATIO = 200  # inflated / compressed for a member kept whole; real .so files stay far below (zeros would not)


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
    return text.encode("utf-8" if info.flag_bits & _FLAG_UTF8 else "cp437")


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
        at, need = info.header_offset, _LOCAL.size + len(name)
        rel = at - self.start
        if rel < 0 or rel + need > len(self.buf):
            self.buf, self.start, rel = self.read(max(_WINDOW, need), at), at, 0
        if rel + _LOCAL.size > len(self.buf) or _LOCAL.unpack_from(self.buf, rel)[0] != _LOCAL_SIG:
            raise ZipError(f"{info.orig_filename}: no local header at offset {at}")
        name_len: int
        extra_len: int
        name_len, extra_len = _LOCAL.unpack_from(self.buf, rel)[-2:]
        if name_len != len(name) or self.buf[rel + _LOCAL.size : rel + need] != name:
            raise ZipError(f"{info.orig_filename}: local header names another member")
        return at + _LOCAL.size + name_len + extra_len


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
    if not _SUSPECT.search(name):  # one search clears most names (70,000 members: it adds up)
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
        self._zlib = (
            zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type == zipfile.ZIP_DEFLATED else None
        )
        self._size = 0
        self._crc = 0

    def _count(self, plain: bytes) -> bytes:
        self._size += len(plain)
        if self._size > self._info.file_size:
            raise ZipError(
                f"{self._info.orig_filename}: inflates past its declared {self._info.file_size} bytes"
            )
        self._crc = zlib.crc32(plain, self._crc)
        return plain

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The plain bytes ``raw`` inflates to, in bounded chunks."""
        if self._zlib is None:
            yield self._count(raw)
            return
        try:
            while raw:
                yield self._count(self._zlib.decompress(raw, CHUNK))
                raw = self._zlib.unconsumed_tail
        except zlib.error as e:
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
    if info.compress_type == zipfile.ZIP_DEFLATED:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            plain = inflater.decompress(raw, info.file_size + 1)  # one byte past the declared size: a liar
        except zlib.error as e:
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
    if zlib.crc32(plain) != info.CRC:
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


def _dos_time(date_time: tuple[int, int, int, int, int, int]) -> tuple[int, int]:
    year, month, day, hour, minute, second = date_time
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day


def _strip_zip64(extra: bytes) -> bytes:
    """``extra`` without ZIP64 blocks (this writer writes its own) or a malformed tail."""
    if not extra:  # most members: nothing to strip
        return extra
    kept, i = [], 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, i)
        if tag != _ZIP64_EXTRA and i + 4 + size <= len(extra):
            kept.append(extra[i : i + 4 + size])
        i += 4 + size
    return b"".join(kept)


class Directory(NamedTuple):
    """An archive's members as its central directory lists them, and where each one's data starts."""

    infos: list[zipfile.ZipInfo]
    offsets: dict[str, int]


class _Entry(NamedTuple):
    """What the central directory needs to say about one written member (a tuple: 70,000 of them are made
    in a row, and a frozen dataclass's ``__init__`` costs several times a tuple's)."""

    info: zipfile.ZipInfo
    name: bytes
    text: str  # the name as a str
    offset: int
    crc: int
    compress_size: int
    file_size: int


class RawZipWriter:
    """Write a zip archive to ``f`` member by member from already-compressed bytes.

    Members are written with sizes in the local header (never data descriptors), so the source's
    descriptors are dropped; names, method, flags, times, extra fields (less ZIP64, which is rewritten)
    and ``external_attr`` (unix permissions) are kept from the source :class:`zipfile.ZipInfo`.
    """

    def __init__(self, f: BinaryIO, *, force_zip64: bool = False) -> None:
        self._f = f
        self._pos = 0
        self._entries: list[_Entry] = []
        self._data: list[int] = []  # where each entry's data starts
        self._zip64 = force_zip64

    def _big(self, n: int) -> bool:
        return self._zip64 or n >= ZIP64_LIMIT

    def _write(self, data: bytes) -> None:
        self._f.write(data)
        self._pos += len(data)

    def add_raw(
        self,
        info: zipfile.ZipInfo,
        chunks: Iterable[bytes],
        *,
        name: str | None = None,
        crc: int | None = None,
        compress_size: int | None = None,
        file_size: int | None = None,
    ) -> None:
        """Write one member: ``chunks`` are its compressed bytes; sizes and CRC default to ``info``'s."""
        entry = _Entry(
            info,
            name_bytes(info, name),
            info.orig_filename if name is None else name,
            self._pos,
            info.CRC if crc is None else crc,
            info.compress_size if compress_size is None else compress_size,
            info.file_size if file_size is None else file_size,
        )
        if info.flag_bits & _FLAG_ENCRYPTED or info.compress_type not in SUPPORTED_METHODS:
            raise ZipError(f"{info.orig_filename}: encrypted or unsupported compression")
        # A local header with ZIP64 sizes must carry both of them (APPNOTE 4.5.3).
        zip64 = self._big(entry.file_size) or self._big(entry.compress_size)
        extra = _strip_zip64(info.extra)
        if zip64:
            extra = struct.pack("<HHQQ", _ZIP64_EXTRA, 16, entry.file_size, entry.compress_size) + extra
        dostime, dosdate = _dos_time(info.date_time)
        self._write(
            _LOCAL.pack(
                _LOCAL_SIG,
                max(info.extract_version, 45 if zip64 else 20),
                info.flag_bits & ~_FLAG_DESCRIPTOR,
                info.compress_type,
                dostime,
                dosdate,
                entry.crc,
                0xFFFFFFFF if zip64 else entry.compress_size,
                0xFFFFFFFF if zip64 else entry.file_size,
                len(entry.name),
                len(extra),
            )
            + entry.name
            + extra
        )
        data = self._pos
        written = 0
        for chunk in chunks:
            self._write(chunk)
            written += len(chunk)
        if written != entry.compress_size:
            raise ZipError(
                f"{info.orig_filename}: wrote {written} compressed bytes, expected {entry.compress_size}"
            )
        self._entries.append(entry)
        self._data.append(data)

    def add_bytes(self, info: zipfile.ZipInfo, data: bytes, *, name: str | None = None) -> None:
        """Write one member from plain ``data``, compressed with ``info``'s method (new METADATA, RECORD)."""
        if info.compress_type == zipfile.ZIP_DEFLATED:
            comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            raw = comp.compress(data) + comp.flush()
        else:
            raw = data
        self.add_raw(
            info, [raw], name=name, crc=zlib.crc32(data), compress_size=len(raw), file_size=len(data)
        )

    def directory(self) -> Directory:
        """The members written so far as a reader of the archive's central directory and local headers
        finds them, without reading them back."""
        infos = []
        for e in self._entries:
            info = zipfile.ZipInfo(e.text, e.info.date_time)
            info.compress_type, info.flag_bits = e.info.compress_type, e.info.flag_bits & ~_FLAG_DESCRIPTOR
            info.create_system, info.create_version = e.info.create_system, e.info.create_version
            info.extract_version, info.extra = e.info.extract_version, _strip_zip64(e.info.extra)
            info.internal_attr, info.external_attr = e.info.internal_attr, e.info.external_attr
            info.CRC, info.compress_size, info.file_size, info.header_offset = e.crc, e.compress_size, e.file_size, e.offset
            infos.append(info)
        return Directory(infos, {e.text: data for e, data in zip(self._entries, self._data, strict=True)})

    def _central(self, e: _Entry) -> bytes:
        fields = [
            (e.file_size, self._big(e.file_size)),
            (e.compress_size, self._big(e.compress_size)),
            (e.offset, self._big(e.offset)),
        ]
        big = [value for value, over in fields if over]
        extra = _strip_zip64(e.info.extra)
        if big:
            extra = struct.pack(f"<HH{len(big)}Q", _ZIP64_EXTRA, 8 * len(big), *big) + extra
        small = [0xFFFFFFFF if over else value for value, over in fields]
        dostime, dosdate = _dos_time(e.info.date_time)
        version = max(e.info.extract_version, 45 if big else 20)
        return (
            _CENTRAL.pack(
                _CENTRAL_SIG,
                (e.info.create_system << 8) | max(e.info.create_version, version),
                version,
                e.info.flag_bits & ~_FLAG_DESCRIPTOR,
                e.info.compress_type,
                dostime,
                dosdate,
                e.crc,
                small[1],
                small[0],
                len(e.name),
                len(extra),
                0,
                0,
                e.info.internal_attr,
                e.info.external_attr,
                small[2],
            )
            + e.name
            + extra
        )

    def close(self) -> None:
        """Write the central directory and the end records (ZIP64 ones where needed)."""
        start = self._pos
        for entry in self._entries:
            self._write(self._central(entry))
        size, count = self._pos - start, len(self._entries)
        if self._zip64 or count >= ZIP_FILECOUNT_LIMIT or self._big(start) or self._big(size):
            eocd64 = self._pos
            self._write(_EOCD64.pack(_EOCD64_SIG, _EOCD64.size - 12, 45, 45, 0, 0, count, count, size, start))
            self._write(_LOCATOR64.pack(_LOCATOR64_SIG, 0, eocd64, 1))
            count, size, start = min(count, 0xFFFF), min(size, 0xFFFFFFFF), min(start, 0xFFFFFFFF)
            if self._zip64:
                count, start = 0xFFFF, 0xFFFFFFFF
        self._write(_EOCD.pack(_EOCD_SIG, 0, 0, count, count, size, start, 0))
