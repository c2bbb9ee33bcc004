"""Wheel I/O: safe opening, RECORD checks, retag; the results are installed by pip and uv."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile  # type: ignore[import-untyped]

from librarian.coords import Label
from librarian.errors import BadWheel, Refused
from librarian.wheel import zipraw, zipwriter
from librarian.wheel.record import verify_record
from librarian.wheel.relabel import retag
from librarian.wheel.wheelfile import read_wheel_info, sha256_file
from tests.builders import HERE_TAG, UnseekableSink, make_wheel, record_hash

LABEL = Label.parse("cu128torch2.8")
SO = b"\x7fELF" + bytes(range(256)) * 400
TAGS = HERE_TAG
RUN_ENV = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_OFFLINE": "1"}


def _wheel(directory: Path, **kwargs: object) -> Path:
    files = {"tinykern/__init__.py": b"VALUE = 1\n", "tinykern/_k.so": SO}
    return make_wheel(
        directory,
        tags=TAGS,
        files=files,
        modes={"tinykern/_k.so": 0o755},
        data_files={"scripts/tk": b"#!/bin/sh\necho tk\n", "data/share/tk.txt": b"tk\n"},
        **kwargs,  # type: ignore[arg-type]
    )


def _raw(path: Path, info: zipfile.ZipInfo) -> bytes:
    with path.open("rb") as f:
        return b"".join(zipraw.iter_raw(f, zipraw.data_offset(f, info), info.compress_size))


def _new_name(old: str) -> str:
    return old.replace("tinykern-1.0.0.", "tinykern-1.0.0+cu128torch2.8.")


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_retag_renames_and_copies_compressed_bytes(tmp_path: Path, compression: int) -> None:
    src = _wheel(tmp_path / "in", compression=compression)
    before = sha256_file(src)
    out = retag(src, LABEL, tmp_path / "out")
    assert out.name == f"tinykern-1.0.0+cu128torch2.8-{TAGS}.whl"
    assert sha256_file(src) == before
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(out) as b:
        assert [_new_name(i.filename) for i in a.infolist()] == [i.filename for i in b.infolist()]
        assert "tinykern-1.0.0+cu128torch2.8.data/scripts/tk" in b.namelist()
        for x, y in zip(a.infolist(), b.infolist(), strict=True):
            assert (x.external_attr, x.compress_type, x.date_time) == (
                y.external_attr,
                y.compress_type,
                y.date_time,
            )
            if x.filename.endswith(("/METADATA", "/RECORD")):
                continue
            assert (x.CRC, x.compress_size, _raw(src, x)) == (y.CRC, y.compress_size, _raw(out, y))
        assert (b.getinfo("tinykern/_k.so").external_attr >> 16) & 0o777 == 0o755
        metadata = b.read("tinykern-1.0.0+cu128torch2.8.dist-info/METADATA").decode()
        assert "\nVersion: 1.0.0+cu128torch2.8\n" in metadata
        record = b.read("tinykern-1.0.0+cu128torch2.8.dist-info/RECORD").decode().splitlines()
        assert (
            f"tinykern-1.0.0+cu128torch2.8.dist-info/METADATA,{record_hash(metadata.encode())},{len(metadata)}"
            in record
        )
        assert record[-1] == "tinykern-1.0.0+cu128torch2.8.dist-info/RECORD,,"
    verify_record(out)
    info = read_wheel_info(out)
    assert (info.metadata_version, info.dist_info, info.mismatches()) == (
        "1.0.0+cu128torch2.8",
        "tinykern-1.0.0+cu128torch2.8.dist-info",
        (),
    )
    assert list(tmp_path.joinpath("out").iterdir()) == [out]


@pytest.mark.parametrize("verify", [True, False])
def test_retag_output_passes_wheel_own_checks(tmp_path: Path, verify: bool) -> None:
    out = retag(_wheel(tmp_path), LABEL, tmp_path / "out", verify=verify)
    with WheelFile(out) as wf:  # reading each member checks it against RECORD
        for name in wf.namelist():
            wf.read(name)
    subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", str(tmp_path / "u"), str(out)], check=True)
    assert os.access(tmp_path / "u/tinykern-1.0.0+cu128torch2.8/tinykern/_k.so", os.X_OK)


def _unseekable_wheel(directory: Path) -> Path:
    """The same wheel rewritten through a stream zipfile cannot seek, so every member has a data descriptor."""
    src = _wheel(directory / "plain")

    stream = UnseekableSink()
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as b:
        for info in a.infolist():
            with a.open(info) as r, b.open(info, "w") as w:
                w.write(r.read())
    path = directory / src.name
    path.write_bytes(stream.buf.getvalue())
    return path


def test_retag_reads_data_descriptors(tmp_path: Path) -> None:
    src = _unseekable_wheel(tmp_path)
    with zipfile.ZipFile(src) as zf:
        assert all(i.flag_bits & 0x8 for i in zf.infolist())
    out = retag(src, LABEL, tmp_path / "out")
    with zipfile.ZipFile(out) as zf:
        assert zf.testzip() is None
        assert not any(i.flag_bits & 0x8 for i in zf.infolist())
    verify_record(out)


def test_retag_through_zip64(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zipwriter, "ZIP64_LIMIT", 0)
    monkeypatch.setattr(zipwriter, "ZIP_FILECOUNT_LIMIT", 0)
    out = retag(_wheel(tmp_path), LABEL, tmp_path / "out")
    with out.open("rb") as f:
        assert (0x06064B50).to_bytes(4, "little") in f.read()
    monkeypatch.undo()
    verify_record(out)
    again = retag(out, Label.parse("cu126torch2.7"), tmp_path / "again", relabel=True)
    verify_record(again)


def _pip_target(wheel: Path, target: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        env=RUN_ENV,
    )
    return target


def test_pip_installs_the_retagged_wheel(tmp_path: Path) -> None:
    target = _pip_target(retag(_wheel(tmp_path), LABEL, tmp_path / "out"), tmp_path / "site")
    dist_info = target / "tinykern-1.0.0+cu128torch2.8.dist-info"
    assert "Version: 1.0.0+cu128torch2.8" in (dist_info / "METADATA").read_text()
    assert (target / "tinykern/_k.so").read_bytes() == SO
    assert os.access(target / "tinykern/_k.so", os.X_OK)


def test_pip_show_in_a_fresh_venv(tmp_path: Path) -> None:
    out = retag(_wheel(tmp_path), LABEL, tmp_path / "out")
    # A venv without pip is quick to make; the outer pip installs into it with --python.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(tmp_path / "venv/bin/python")]
    subprocess.run([*pip, "install", "-q", "--no-deps", str(out)], check=True, env=RUN_ENV)
    shown = subprocess.run(
        [*pip, "show", "tinykern"], check=True, env=RUN_ENV, capture_output=True, text=True
    )
    assert "Version: 1.0.0+cu128torch2.8" in shown.stdout


@pytest.mark.parametrize("zip64", [False, True])
def test_uv_installs_the_retagged_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zip64: bool) -> None:
    if zip64:
        monkeypatch.setattr(zipwriter, "ZIP64_LIMIT", 0)
    out = retag(_unseekable_wheel(tmp_path), LABEL, tmp_path / "out")
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip("uv is not installed beside this Python (pip install -e '.[test]' brings it)")
    env = {**RUN_ENV, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    cmd = [
        str(uv),
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--python",
        sys.executable,
        "--target",
        str(tmp_path / "t"),
    ]
    subprocess.run([*cmd, str(out)], check=True, env=env)
    assert (tmp_path / "t/tinykern-1.0.0+cu128torch2.8.dist-info/METADATA").exists()
    assert os.access(tmp_path / "t/tinykern/_k.so", os.X_OK)


def test_same_label_is_a_no_op_and_copies_elsewhere(tmp_path: Path) -> None:
    labelled = retag(_wheel(tmp_path), LABEL, tmp_path / "out")
    stamp = labelled.stat().st_mtime_ns
    assert retag(labelled, LABEL, tmp_path / "out") == labelled
    assert labelled.stat().st_mtime_ns == stamp
    copy = retag(labelled, LABEL, tmp_path / "elsewhere")
    assert copy == tmp_path / "elsewhere" / labelled.name
    assert sha256_file(copy) == sha256_file(labelled)


@pytest.mark.parametrize(
    "version", ["1.0.0+cu12torch2.8cxx11abiTRUE", "1.0.0+pt28cu128", "1.0.0+cu126torch2.7"]
)
def test_another_label_is_refused_unless_forced(tmp_path: Path, version: str) -> None:
    src = make_wheel(tmp_path, version=version, tags=TAGS)
    with pytest.raises(Refused, match=re.escape(f"{src}: already labelled +{version.split('+')[1]}")):
        retag(src, LABEL, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    out = retag(src, LABEL, tmp_path / "out", relabel=True)
    assert out.name == f"tinykern-1.0.0+cu128torch2.8-{TAGS}.whl"
    assert read_wheel_info(out).dist_info == "tinykern-1.0.0+cu128torch2.8.dist-info"
    verify_record(out)


def _zip(path: Path, members: dict[str, bytes] | list[tuple[str, bytes]]) -> Path:
    pairs = list(members.items()) if isinstance(members, dict) else members
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # zipfile warns on the duplicate names some cases need
        for name, data in pairs:
            zf.writestr(name, data)
    return path


def _evil(tmp_path: Path, name: str) -> Path:
    """A good wheel plus one member ``name`` (not in RECORD)."""
    good = make_wheel(tmp_path / "good", tags=TAGS)
    with zipfile.ZipFile(good) as zf:
        members = [(i.filename, zf.read(i)) for i in zf.infolist()]
    return _zip(tmp_path / good.name, [(name, b"boom"), *members])


def _damage(tmp_path: Path, edit: str) -> Path:
    good = _wheel(tmp_path / "good")
    data = bytearray(good.read_bytes())
    if edit == "truncated":
        data = data[: len(data) // 2]
    elif edit == "bad crc":  # flip a byte of the stored .so's data, keeping the RECORD hash of the original
        with zipfile.ZipFile(good) as zf:
            info = zf.getinfo("tinykern/_k.so")
        with good.open("rb") as f:
            data[zipraw.data_offset(f, info) + 10] ^= 0xFF
    path = tmp_path / good.name
    path.write_bytes(bytes(data))
    return path


BAD: dict[str, tuple[Callable[[Path], Path], str]] = {
    "not a zip": (lambda p: _write(p / f"tinykern-1.0-{TAGS}.whl", b"hello"), "not a zip file"),
    "truncated": (lambda p: _damage(p, "truncated"), "not a zip file"),
    "bad crc": (lambda p: _damage(p, "bad crc"), "bad CRC-32|bad deflate data"),
    "record lies": (
        lambda p: _wheel(p, record_override={"tinykern/_k.so": record_hash(b"other")}),
        "tinykern/_k.so: RECORD says",
    ),
    "dotdot": (lambda p: _evil(p, "../evil"), "'../evil': '..'"),
    "dotdot inside": (lambda p: _evil(p, "tinykern/../../evil"), "'..'"),
    "absolute": (lambda p: _evil(p, "/etc/evil"), "absolute path"),
    "backslash": (lambda p: _evil(p, "tinykern\\evil.py"), "backslash"),
    "duplicate": (lambda p: _evil(p, "tinykern/__init__.py"), "appears twice"),
    "not in record": (lambda p: _evil(p, "tinykern/extra.py"), "tinykern/extra.py: not listed in RECORD"),
    "second dist-info": (
        lambda p: _evil(p, "other-1.0.dist-info/METADATA"),
        "one .dist-info folder, found 2",
    ),
    "no dist-info": (
        lambda p: _zip(p / f"tinykern-1.0.0-{TAGS}.whl", {"tinykern/__init__.py": b""}),
        "one .dist-info folder, found none",
    ),
    "dist-info of another": (
        lambda p: _zip(p / f"tinykern-1.0.0-{TAGS}.whl", {"other-1.0.0.dist-info/METADATA": b""}),
        "other-1.0.0.dist-info does not match",
    ),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _bad_path(tmp_path: Path, case: str) -> Path:
    return BAD[case][0](tmp_path)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_wheels_are_refused_naming_the_file(tmp_path: Path, case: str) -> None:
    src = _bad_path(tmp_path, case)
    before = src.read_bytes()
    out_dir = tmp_path / "out"
    with pytest.raises(BadWheel) as caught:
        retag(src, LABEL, out_dir)
    message = str(caught.value)
    assert message.startswith(f"{src}: ") and "\n" not in message
    assert re.search(BAD[case][1], message), message
    assert list(out_dir.iterdir()) == []  # no output, no temp file
    assert src.read_bytes() == before


@pytest.mark.parametrize(
    "case", ["not a zip", "truncated", "bad crc", "record lies", "not in record", "dotdot"]
)
def test_verify_record_refuses_the_same(tmp_path: Path, case: str) -> None:
    src = _bad_path(tmp_path, case)
    with pytest.raises(BadWheel, match=f"^{re.escape(str(src))}: "):
        verify_record(src)


def test_record_entry_without_member(tmp_path: Path) -> None:
    good = make_wheel(tmp_path / "good", tags=TAGS)
    with zipfile.ZipFile(good) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist() if i.filename != "tinykern/__init__.py"}
    src = _zip(tmp_path / good.name, members)
    with pytest.raises(BadWheel, match="tinykern/__init__.py: listed in RECORD but not in the wheel"):
        verify_record(src)


def test_a_decompression_bomb_is_stopped(tmp_path: Path) -> None:
    good = make_wheel(tmp_path / "good", tags=TAGS, files={"tinykern/bomb.bin": bytes(1000)})
    comp = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    bomb = comp.compress(bytes(64 * zipraw.CHUNK)) + comp.flush()
    src = tmp_path / good.name
    with zipfile.ZipFile(good) as zf, src.open("wb") as f:
        writer = zipwriter.RawZipWriter(f)
        for info in zf.infolist():
            if info.filename == "tinykern/bomb.bin":  # 64 MiB of zeros that claims to be 1,000 bytes
                writer.add_raw(info, [bomb], compress_size=len(bomb))
            else:
                writer.add_raw(info, [_raw(good, info)])
        writer.close()
    with pytest.raises(BadWheel, match="bomb.bin: inflates past its declared 1000 bytes"):
        verify_record(src)
    with pytest.raises(BadWheel, match="inflates past"):
        retag(src, LABEL, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_read_wheel_info_reports_mismatches(tmp_path: Path) -> None:
    good = make_wheel(tmp_path / "good", tags=TAGS)
    with zipfile.ZipFile(good) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    meta = "tinykern-1.0.0.dist-info/METADATA"
    members[meta] = members[meta].replace(b"Version: 1.0.0", b"Version: 1.0.1")
    src = _zip(tmp_path / good.name, members)
    info = read_wheel_info(src)
    assert info.name == "tinykern" and str(info.version) == "1.0.0"
    assert info.wheel_tags == (TAGS,)
    assert info.mismatches() == ("METADATA Version: 1.0.1, filename says 1.0.0",)
    assert {m.path: m.size for m in info.members}["tinykern/__init__.py"] == len(b"VALUE = 1\n")
    with pytest.raises(BadWheel, match="METADATA: Version"):
        retag(src, LABEL, tmp_path / "out")


def test_sha256_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc" * 1_000_000)
    assert sha256_file(path) == hashlib.sha256(b"abc" * 1_000_000).hexdigest()


def test_missing_file_is_a_bad_wheel(tmp_path: Path) -> None:
    with pytest.raises(BadWheel, match="cannot read"):
        read_wheel_info(tmp_path / f"tinykern-1.0-{TAGS}.whl")


def test_signatures_are_dropped(tmp_path: Path) -> None:
    src = make_wheel(
        tmp_path, tags=TAGS, files={"tinykern/__init__.py": b"", "tinykern-1.0.0.dist-info/RECORD.jws": b"{}"}
    )
    out = retag(src, LABEL, tmp_path / "out")
    with zipfile.ZipFile(out) as zf:
        assert not any(n.endswith("RECORD.jws") for n in zf.namelist())
    verify_record(out)


SAMPLES = sorted((Path(__file__).parent.parent / "samples/dist").glob("*.whl"))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_sample_wheels_are_valid_and_retag(tmp_path: Path, sample: Path) -> None:
    verify_record(sample)
    info = read_wheel_info(sample)
    assert info.mismatches() == () and info.version.local is None
    assert {m.path: m.mode for m in info.members}["tinykern/_tinykern.so"] == 0o755
    out = retag(sample, LABEL, tmp_path)
    verify_record(out)
    assert read_wheel_info(out).dist_info == "tinykern-0.1.0+cu128torch2.8.dist-info"


def test_a_relabel_hashes_the_new_wheel_as_it_writes_it(tmp_path: Path) -> None:
    """publish takes the staged copy's sha256 from the write, not from reading the file again."""
    import hashlib

    from librarian.coords import Label
    from librarian.wheel.relabel import retag_with_directory
    from tests.builders import make_wheel

    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    out = retag_with_directory(wheel, Label.parse("cu128torch2.9"), tmp_path / "out")
    assert out.sha256 == hashlib.sha256(out.path.read_bytes()).hexdigest()
    assert out.size == out.path.stat().st_size
    # The retag command stores nothing: it skips the digest, and writes the very same bytes.
    bare = retag_with_directory(wheel, Label.parse("cu128torch2.9"), tmp_path / "bare", digest=False)
    assert bare.sha256 is None and bare.path.read_bytes() == out.path.read_bytes()


def test_retag_which_returns_only_the_path_hashes_no_new_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``retag()`` gives back the path alone: a sha256 pass over the whole new wheel would be thrown away."""
    from librarian.wheel import relabel
    from tests.builders import make_wheel

    asked: list[bool] = []
    hashing = relabel.Hashing

    def spy(out: object, digest: bool = True) -> relabel.Hashing:
        asked.append(digest)
        return hashing(out, digest)  # type: ignore[arg-type]

    monkeypatch.setattr(relabel, "Hashing", spy)
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    out = relabel.retag(wheel, LABEL, tmp_path / "out")
    assert asked == [False] and read_wheel_info(out).version.local is not None
    verify_record(out)
