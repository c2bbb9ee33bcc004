"""The raw zip writer and the bounded inflater, checked against zipfile as the reader."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest

from librarian.wheel import zipraw, zipwriter
from tests.builders import UnseekableSink


def _source(compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data, mode in [
            ("a.txt", b"hello " * 100, 0o644),
            ("lib/k.so", bytes(range(256)) * 50, 0o755),
        ]:
            info = zipfile.ZipInfo(name, date_time=(2024, 5, 6, 7, 8, 10))
            info.compress_type = compression
            info.external_attr = (0o100000 | mode) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def _raw(blob: bytes, info: zipfile.ZipInfo) -> bytes:
    f = io.BytesIO(blob)
    return b"".join(zipraw.iter_raw(f, zipraw.data_offset(f, info), info.compress_size))


def _copy(blob: bytes, *, force_zip64: bool = False) -> bytes:
    out = io.BytesIO()
    writer = zipwriter.RawZipWriter(out, force_zip64=force_zip64)
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        for info in zf.infolist():
            writer.add_raw(info, [_raw(blob, info)])
    writer.close()
    return out.getvalue()


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
@pytest.mark.parametrize("force_zip64", [False, True])
def test_raw_copy_keeps_every_member_byte_for_byte(compression: int, force_zip64: bool) -> None:
    src = _source(compression)
    out = _copy(src, force_zip64=force_zip64)
    with zipfile.ZipFile(io.BytesIO(src)) as a, zipfile.ZipFile(io.BytesIO(out)) as b:
        assert b.testzip() is None
        for x, y in zip(a.infolist(), b.infolist(), strict=True):
            assert (x.filename, x.CRC, x.compress_type, x.external_attr, x.date_time) == (
                y.filename,
                y.CRC,
                y.compress_type,
                y.external_attr,
                y.date_time,
            )
            assert _raw(src, x) == _raw(out, y)
            assert a.read(x) == b.read(y)


def test_forced_zip64_writes_zip64_records_and_local_sizes() -> None:
    out = _copy(_source(), force_zip64=True)
    assert struct.pack("<I", 0x06064B50) in out and struct.pack("<I", 0x07064B50) in out
    # Local header: both 32-bit sizes are 0xFFFFFFFF, the real ones sit in the ZIP64 extra field.
    assert struct.unpack_from("<II", out, 18) == (0xFFFFFFFF, 0xFFFFFFFF)
    eocd = out[-22:]
    assert struct.unpack("<IHHHHIIH", eocd)[3:7:3] == (0xFFFF, 0xFFFFFFFF)


def test_zip64_by_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    # Lowering the limits drives the same path a 4 GiB member, offset or 65,535 entries would.
    monkeypatch.setattr(zipwriter, "ZIP64_LIMIT", 100)
    monkeypatch.setattr(zipwriter, "ZIP_FILECOUNT_LIMIT", 1)
    out = _copy(_source())
    with zipfile.ZipFile(io.BytesIO(out)) as zf:
        assert zf.testzip() is None
        assert [i.filename for i in zf.infolist()] == ["a.txt", "lib/k.so"]
    assert struct.pack("<I", 0x06064B50) in out


def test_data_descriptors_are_dropped() -> None:
    stream = UnseekableSink()
    with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.bin", b"x" * 5000)
    src = stream.buf.getvalue()
    with zipfile.ZipFile(io.BytesIO(src)) as zf:
        assert zf.infolist()[0].flag_bits & 0x8
    out = _copy(src)
    with zipfile.ZipFile(io.BytesIO(out)) as zf:
        info = zf.infolist()[0]
        assert not info.flag_bits & 0x8
        assert zf.read(info) == b"x" * 5000
    assert struct.unpack_from("<I", out, 14)[0] == zlib.crc32(b"x" * 5000)


def _info(data: bytes, *, file_size: int | None = None) -> tuple[zipfile.ZipInfo, bytes]:
    comp = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw = comp.compress(data) + comp.flush()
    info = zipfile.ZipInfo("m")
    info.compress_type = zipfile.ZIP_DEFLATED
    info.CRC, info.compress_size = zlib.crc32(data), len(raw)
    info.file_size = len(data) if file_size is None else file_size
    return info, raw


def test_inflater_output_is_bounded_and_checked() -> None:
    data = bytes(10 * zipraw.CHUNK + 7)
    info, raw = _info(data)
    inflater = zipraw.Inflater(info)
    chunks = [c for piece in (raw[:100], raw[100:]) for c in inflater.feed(piece)] + list(inflater.finish())
    assert max(len(c) for c in chunks) <= zipraw.CHUNK
    assert b"".join(chunks) == data


def test_inflater_stops_a_bomb_before_it_grows() -> None:
    info, raw = _info(bytes(50 * zipraw.CHUNK), file_size=1000)
    inflater = zipraw.Inflater(info)
    with pytest.raises(zipraw.ZipError, match="inflates past its declared 1000 bytes"):
        for _ in inflater.feed(raw):
            pass


def _drain(info: zipfile.ZipInfo, raw: bytes) -> None:
    inflater = zipraw.Inflater(info)
    for _ in inflater.feed(raw):
        pass
    for _ in inflater.finish():
        pass


def test_inflater_rejects_a_truncated_stream() -> None:
    info, raw = _info(b"payload " * 1000)
    with pytest.raises(zipraw.ZipError, match="truncated"):
        _drain(info, raw[: len(raw) // 2])


def test_inflater_rejects_a_bad_crc() -> None:
    info, raw = _info(b"payload " * 1000)
    info.CRC ^= 1
    with pytest.raises(zipraw.ZipError, match="bad CRC-32"):
        _drain(info, raw)


def test_local_header_must_match_central_directory() -> None:
    src = bytearray(_source())
    src[30] ^= 0x20  # the first member's name, in its local header only
    with zipfile.ZipFile(io.BytesIO(bytes(src))) as zf:
        info = zf.infolist()[0]
    with pytest.raises(zipraw.ZipError, match="local header names another member"):
        zipraw.data_offset(io.BytesIO(bytes(src)), info)


def test_writer_refuses_short_data() -> None:
    info, raw = _info(b"abc" * 100)
    with pytest.raises(zipraw.ZipError, match="expected"):
        zipwriter.RawZipWriter(io.BytesIO()).add_raw(info, [raw[:-1]])


@pytest.mark.parametrize("force_zip64", [False, True])
def test_writer_directory_is_what_a_reader_finds(force_zip64: bool) -> None:
    blob = _source()
    copy = _copy(blob, force_zip64=force_zip64)
    with zipfile.ZipFile(io.BytesIO(blob)) as src:
        sink = io.BytesIO()
        writer = zipwriter.RawZipWriter(sink, force_zip64=force_zip64)
        for info in src.infolist():
            writer.add_raw(info, [_raw(blob, info)])
        writer.close()
        assert sink.getvalue() == copy
    with zipfile.ZipFile(io.BytesIO(copy)) as back:
        read = back.infolist()
    fields = (
        "orig_filename",
        "filename",
        "header_offset",
        "CRC",
        "compress_size",
        "file_size",
        "flag_bits",
        "compress_type",
        "external_attr",
        "date_time",
    )
    written = writer.directory()
    assert [[getattr(i, f) for f in fields] for i in written.infos] == [
        [getattr(i, f) for f in fields] for i in read
    ]
    assert written.offsets == zipraw.data_offsets(io.BytesIO(copy), read)


NAMES = [
    "a/b.py",
    "",
    "/",
    "/abs",
    "a//b",
    "a/./b",
    "../x",
    "./x",
    "a/..",
    "a/.",
    "C:x",
    "c:/x",
    "a\\b",
    "a\x00b",
    "a/b/",
    "a//",
    "a/.hidden",
    "x/",
    "a/..b",
    ".dist",
    "..",
    ".",
    "a/b/../c",
]


@pytest.mark.parametrize("name", NAMES)
def test_unsafe_name_fast_path_agrees_with_the_rules(name: str) -> None:
    path = name.removesuffix("/")
    expected = None
    if "\\" in name or "\x00" in name:
        expected = "backslash or NUL in the name"
    elif name.startswith("/") or (
        len(name) > 1 and name[1] == ":" and name[0].isascii() and name[0].isalpha()
    ):
        expected = "absolute path"
    elif any(part in {"", ".", ".."} for part in path.split("/")):
        expected = "'..', '.' or empty path segment"
    assert zipraw.unsafe_name(name) == expected
