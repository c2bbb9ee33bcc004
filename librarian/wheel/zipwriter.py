"""Writing a zip archive from members' raw compressed bytes, never recompressed: local headers, data,
central directory, end records, with ZIP64 where sizes, offsets or counts need it.

Reading (local headers, inflating, the zip-bomb policy) is :mod:`librarian.wheel.zipraw`.
Format reference: https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterable
from typing import BinaryIO, NamedTuple

from librarian.wheel.zipraw import (
    FLAG_DESCRIPTOR,
    FLAG_ENCRYPTED,
    LOCAL_HEADER,
    LOCAL_SIG,
    SUPPORTED_METHODS,
    Directory,
    ZipError,
    name_bytes,
)

# Past these, an entry or the archive needs ZIP64 records; module globals (as in zipfile) so a test can
# lower them and drive the ZIP64 path with small files.
ZIP64_LIMIT = 0xFFFFFFFF
ZIP_FILECOUNT_LIMIT = 0xFFFF

_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_LOCATOR64 = struct.Struct("<IIQI")
_CENTRAL_SIG, _EOCD_SIG, _EOCD64_SIG, _LOCATOR64_SIG = 0x02014B50, 0x06054B50, 0x06064B50, 0x07064B50
_ZIP64_EXTRA = 0x0001


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
        if info.flag_bits & FLAG_ENCRYPTED or info.compress_type not in SUPPORTED_METHODS:
            raise ZipError(f"{info.orig_filename}: encrypted or unsupported compression")
        # A local header with ZIP64 sizes must carry both of them (APPNOTE 4.5.3).
        zip64 = self._big(entry.file_size) or self._big(entry.compress_size)
        extra = _strip_zip64(info.extra)
        if zip64:
            extra = struct.pack("<HHQQ", _ZIP64_EXTRA, 16, entry.file_size, entry.compress_size) + extra
        dostime, dosdate = _dos_time(info.date_time)
        self._write(
            LOCAL_HEADER.pack(
                LOCAL_SIG,
                max(info.extract_version, 45 if zip64 else 20),
                info.flag_bits & ~FLAG_DESCRIPTOR,
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
            info.compress_type, info.flag_bits = e.info.compress_type, e.info.flag_bits & ~FLAG_DESCRIPTOR
            info.create_system, info.create_version = e.info.create_system, e.info.create_version
            info.extract_version, info.extra = e.info.extract_version, _strip_zip64(e.info.extra)
            info.internal_attr, info.external_attr = e.info.internal_attr, e.info.external_attr
            info.CRC, info.compress_size, info.file_size, info.header_offset = (
                e.crc,
                e.compress_size,
                e.file_size,
                e.offset,
            )
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
                e.info.flag_bits & ~FLAG_DESCRIPTOR,
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
