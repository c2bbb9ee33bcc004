"""librarian.wheel.deep: one pass per wheel (metadata, RECORD, binaries), each member inflated once,
with the findings of the separate checks in their order."""

from __future__ import annotations

import collections
import struct
import zipfile
from pathlib import Path

import pytest

from librarian.errors import BadBinary, BadWheel
from librarian.wheel import zipraw
from librarian.wheel.deep import read_deep
from librarian.wheel.members import inspect_wheel
from librarian.wheel.record import verify_record
from tests.builders import make_wheel, record_hash
from tests.cuda_fixtures import cubin_bytes, elf_bytes, fatbin_blob, fatbin_entry, so_with_fatbin

TAGS = "cp312-cp312-linux_x86_64"


def _files() -> dict[str, bytes]:
    fat = so_with_fatbin(
        fatbin_blob(fatbin_entry(2, 80, cubin_bytes(80)), fatbin_entry(2, 90, cubin_bytes(90)))
    )
    return {
        "tinykern/a.py": b"A = 1\n" * 50,
        "tinykern/_C.so": fat,
        "tinykern/_big.so": elf_bytes(needed=("libc.so.6",))
        + bytes(range(256)) * 400,  # spooled (SMALL_MEMBER lowered)
        "tinykern/k.cubin": cubin_bytes(89),
        "tinykern/b.py": b"B = 2\n" * 50,
    }


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How many times each member is inflated, by any reader."""
    seen: collections.Counter[str] = collections.Counter()
    real_init, real_whole = zipraw.Inflater.__init__, zipraw.inflate_whole

    def init(self: zipraw.Inflater, info: zipfile.ZipInfo) -> None:
        seen[info.orig_filename] += 1
        real_init(self, info)

    def whole(info: zipfile.ZipInfo, raw: bytes) -> bytes:
        seen[info.orig_filename] += 1
        return real_whole(info, raw)

    monkeypatch.setattr(zipraw.Inflater, "__init__", init)
    monkeypatch.setattr(zipraw, "inflate_whole", whole)
    return seen


@pytest.mark.parametrize("jobs", [1, 3])
def test_each_member_is_inflated_once_and_the_facts_are_inspects(
    tmp_path: Path, counted: collections.Counter[str], monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    monkeypatch.setattr("librarian.wheel.members.SMALL_MEMBER", 64 << 10)  # _big.so is spooled to a file
    wheel = make_wheel(tmp_path, files=_files(), tags=TAGS)
    read = read_deep(wheel, jobs=jobs)
    assert (read.problems, read.liar, read.failure, read.unreadable) == ((), None, None, None)
    with zipfile.ZipFile(wheel) as zf:
        recorded = [i.filename for i in zf.infolist()]
    # METADATA and WHEEL are read whole for the metadata checks, then hashed: every other member once
    # (RECORD to be parsed, the rest to be hashed, the binaries' bytes inspected from that same inflate).
    assert {
        m: n for m, n in counted.items() if not m.endswith((".dist-info/METADATA", ".dist-info/WHEEL"))
    } == {m: 1 for m in recorded if not m.endswith((".dist-info/METADATA", ".dist-info/WHEEL"))}
    counted.clear()
    assert read.facts == inspect_wheel(wheel, jobs=jobs)


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_liar_comes_before_a_binary_that_cannot_be_read(tmp_path: Path, jobs: int) -> None:
    good = elf_bytes(needed=("libc.so.6",))
    shoff = struct.unpack_from("<Q", good, 0x28)[0]
    files = {**_files(), "tinykern/_C.so": good[: shoff + 10]}  # inspection fails on it
    wheel = make_wheel(tmp_path / "a", files=files, tags=TAGS)
    read = read_deep(wheel, jobs=jobs)
    assert read.liar is None and read.facts is None
    assert isinstance(read.failure, BadBinary)
    assert str(read.failure).startswith(f"{wheel.name}!tinykern/_C.so: truncated section header table")
    lying = make_wheel(
        tmp_path / "b", files=files, tags=TAGS, record_override={"tinykern/b.py": record_hash(b"no")}
    )
    read = read_deep(lying, jobs=jobs)
    assert read.liar is not None and read.liar.startswith("tinykern/b.py: RECORD says")
    assert read.facts is None
    with pytest.raises(BadWheel, match="tinykern/b.py: RECORD says"):
        read.publishable()
    with pytest.raises(BadWheel) as separate:
        verify_record(lying, jobs=jobs)
    assert str(separate.value) == f"{lying}: {read.liar}"


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_zip_bomb_is_not_inflated_whole_but_record_is_still_checked(tmp_path: Path, jobs: int) -> None:
    files = {**_files(), "tinykern/_z.so": elf_bytes() + bytes(32 << 20)}
    wheel = make_wheel(tmp_path / "a", files=files, tags=TAGS)
    read = read_deep(wheel, jobs=jobs)
    assert read.liar is None and read.facts is None
    assert isinstance(read.failure, BadWheel)
    assert str(read.failure).startswith(f"{wheel.name}!tinykern/_z.so: compresses ")
    assert str(read.failure).endswith(":1 (zip bomb?)")
    with pytest.raises(BadWheel, match=r"compresses \d+:1 \(zip bomb\?\)"):
        inspect_wheel(wheel)
    lying = make_wheel(
        tmp_path / "b", files=files, tags=TAGS, record_override={"tinykern/a.py": record_hash(b"no")}
    )
    assert (read_deep(lying, jobs=jobs).liar or "").startswith("tinykern/a.py: RECORD says")


def test_metadata_that_does_not_inflate_comes_after_an_earlier_liar(tmp_path: Path) -> None:
    files = {"tinykern/a.py": b"A = 1\n" * 50, **_files()}
    wheel = make_wheel(
        tmp_path, files=files, tags=TAGS, record_override={"tinykern/a.py": record_hash(b"no")}
    )
    raw = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        meta = next(i for i in zf.infolist() if i.filename.endswith(".dist-info/METADATA"))
    with wheel.open("rb") as f:
        start = zipraw.data_offset(f, meta)
    raw[start : start + meta.compress_size] = b"\xff" * meta.compress_size  # not deflate data
    wheel.write_bytes(bytes(raw))
    read = read_deep(wheel)
    assert read.unreadable is not None and "METADATA" in str(read.unreadable)
    assert str(read.unreadable).startswith(f"{wheel}: ")
    with pytest.raises(
        BadWheel, match="tinykern/a.py: RECORD says"
    ):  # publish: RECORD first, as verify_record ran first
        read.publishable()
