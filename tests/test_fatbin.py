"""librarian.wheel.fatbin: archs, suffixes, compression and toolkit from real nvcc output and hand-built blobs."""

from __future__ import annotations

import random
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import zstandard

from librarian.coords import GpuArch
from librarian.errors import BadBinary
from librarian.facts import FatbinEntry
from librarian.wheel import fatbin, fatbin_walk
from librarian.wheel.elf import Source, read_elf
from librarian.wheel.fatbin import (
    blob_toolkit,
    cubin_toolkit,
    entry_payload,
    ptx_toolkit,
    read_fatbin,
    scan_fatbins,
)
from librarian.wheel.fatbin_walk import EntryHeader, valid_blob_at, walk_blobs
from tests.cuda_fixtures import (
    COMPRESS_MODES,
    cubin_bytes,
    fatbin_blob,
    fatbin_entry,
    fixtures_toolkit,
    real_sos,
)


@pytest.fixture(scope="session")
def cuda_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc-built fixtures (checked in; rebuilt once per session when asked)."""
    return real_sos(tmp_path_factory)


def _entries(path: Path, section: str = ".nv_fatbin") -> tuple[FatbinEntry, ...]:
    data = path.read_bytes()
    sec = read_elf(data).section(section)
    assert sec is not None
    return read_fatbin(data, sec.offset, sec.size, relocatable=section != ".nv_fatbin", section=section)


def _names(entries: tuple[FatbinEntry, ...]) -> list[str]:
    return [str(e.arch) for e in entries]


# The device-link blob repeats every SASS arch of an `nvcc -shared` build (reference section 1).
EXPECTED = {
    "sm75": ["sm_75", "sm_75"],
    "multi": ["sm_75", "sm_80", "sm_86", "sm_89"] * 2 + ["compute_89"],
    "special": ["sm_90a", "sm_100f", "sm_120f", "sm_90a", "sm_100f", "sm_120f", "compute_120f"],
    "ptx": ["compute_80"],
    "debug": ["sm_75", "sm_75"],
    "two_tu": ["sm_80"] * 3,
    "rdc": ["sm_80"],
    "stripped": ["sm_75", "sm_75"],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_archs_and_toolkit_per_fixture(cuda_sos: dict[str, Path], name: str) -> None:
    entries = _entries(cuda_sos[name])
    assert _names(entries) == EXPECTED[name]
    nvcc = fixtures_toolkit()
    assert {e.toolkit for e in entries} == {nvcc}
    for e in entries:
        assert not e.relocatable and e.debug is (name == "debug")


def test_relocatable_section(cuda_sos: dict[str, Path]) -> None:
    entries = _entries(cuda_sos["rdc"], "__nv_relfatbin")
    assert _names(entries) == ["sm_80", "compute_80"]
    assert all(e.relocatable for e in entries)


@pytest.mark.parametrize("mode", COMPRESS_MODES)
def test_every_compress_mode(cuda_sos: dict[str, Path], mode: str) -> None:
    entries = _entries(cuda_sos[f"compress_{mode}"])
    assert _names(entries) == ["sm_80", "sm_80", "compute_80"]
    want = {"none": "none", "speed": "lz4"}.get(mode, "zstd")
    assert {e.compression for e in entries} == {want}
    assert all(e.toolkit == fixtures_toolkit() for e in entries)
    if want != "none":
        assert all(0 < e.payload_size < e.uncompressed_size for e in entries)


def test_toolkit_comes_from_the_cubin_itself(cuda_sos: dict[str, Path]) -> None:
    # Not the ELF-ABI-8 fallback: the inflated (zstd) cubin's own notes say the release.
    data = cuda_sos["compress_size"].read_bytes()
    sec = read_elf(data).section(".nv_fatbin")
    assert sec is not None
    src = Source(data)
    cubin = next(h for blob in walk_blobs(src, sec.offset, sec.size, "s") for h in blob if h.kind == 2)
    assert cubin.compression == "zstd"
    assert cubin_toolkit(entry_payload(src, cubin)) == fixtures_toolkit()


def test_cuda12_style_lz4_cubin_and_ptx() -> None:
    cubin = cubin_bytes(90, api=(12, 8))
    ptx = b".version 8.7\n.target sm_90a\n" + bytes(64)
    blob = fatbin_blob(
        fatbin_entry(2, 90, cubin, compress="lz4", flags=0x100011),
        fatbin_entry(1, 90, ptx, compress="lz4", version=(8, 7), flags=0x100011, header_size=0x50),
    )
    entries = read_fatbin(blob)
    assert [(str(e.arch), e.compression, e.toolkit) for e in entries] == [
        ("sm_90a", "lz4", (12, 8)),
        ("compute_90a", "lz4", (12, 8)),
    ]
    assert entries[0].uncompressed_size == len(cubin)


def test_toolkit_sources_and_lto() -> None:
    blob = fatbin_blob(
        fatbin_entry(2, 100, cubin_bytes(100, release="12.9"), compress="zstd", version=(1, 8)),
        fatbin_entry(8, 90, bytes(64), compress="none", version=(1, 65), flags=0x10011),
    )
    entries = read_fatbin(blob)
    assert [(str(e.arch), e.toolkit) for e in entries] == [("sm_100", (12, 9)), ("lto_90", None)]
    # no notes, no EIATTR: ELF ABI 8 below sm_100 still says CUDA >= 13.0
    assert read_fatbin(fatbin_blob(fatbin_entry(2, 80, cubin_bytes(80), version=(1, 8))))[0].toolkit == (
        13,
        0,
    )
    assert read_fatbin(fatbin_blob(fatbin_entry(2, 80, cubin_bytes(80))))[0].toolkit is None


def test_empty_blobs_zero_padding_and_garbage_resync() -> None:
    one = fatbin_blob(fatbin_entry(2, 80, cubin_bytes(80, api=(13, 0))))
    two = fatbin_blob(fatbin_entry(2, 86, cubin_bytes(86, api=(13, 0))))
    data = fatbin_blob() + one + bytes(64) + b"GARBAGE!" * 3 + two + bytes(24)
    assert _names(read_fatbin(data)) == ["sm_80", "sm_86"]
    with pytest.raises(BadBinary, match="no fatbin header, and none follows"):
        read_fatbin(one + b"GARBAGE!" * 3)


@pytest.mark.parametrize(
    ("isa", "cuda"),
    [
        ((9, 0), (13, 0)),
        ((9, 2), (13, 2)),
        ((8, 8), (12, 9)),
        ((8, 5), (12, 5)),
        ((8, 0), (12, 0)),
        ((7, 8), (11, 8)),
        ((6, 4), (10, 1)),
        ((4, 3), None),
    ],
)
def test_ptx_isa_to_cuda(isa: tuple[int, int], cuda: tuple[int, int] | None) -> None:
    assert ptx_toolkit(isa) == cuda


CUBIN = cubin_bytes(80, api=(13, 0))


def _bomb(declared: int) -> bytes:
    stream = zstandard.ZstdCompressor(level=19).compress(bytes(64 << 20))  # 64 MiB of zeros, ~2 KiB
    entry = fatbin_entry(2, 80, b"", compress="none", flags=0x8011, uncompressed_size=declared)
    # put the bomb stream in as the payload, and say how long it is
    head = bytearray(entry[:0x40])
    padded = stream + bytes(-len(stream) % 8)
    head[0x08:0x10] = len(padded).to_bytes(8, "little")
    head[0x10:0x14] = len(stream).to_bytes(4, "little")
    return fatbin_blob(bytes(head) + padded)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            fatbin_blob(fatbin_entry(2, 80, CUBIN), fat_size=1 << 20),
            "fat_size 0x100000, past the section end",
        ),
        (fatbin_blob(fatbin_entry(2, 80, CUBIN), header_size=0), "header_size 0"),
        (fatbin_blob(fatbin_entry(2, 80, b"", header_size=0) + bytes(0x40)), "header_size 0x0"),  # would loop
        (fatbin_blob(fatbin_entry(2, 80, CUBIN))[:-8], "past the section end"),
        (fatbin_blob(fatbin_entry(2, 80, CUBIN), bytes(16)), "cut off by the end of its blob"),
        (_bomb(4096), "inflates past the 4096 bytes it declares"),
        (_bomb(64 << 20), "compression bomb"),
        (
            fatbin_blob(fatbin_entry(2, 80, CUBIN, compress="lz4", uncompressed_size=len(CUBIN) - 8)),
            "bad LZ4",
        ),
    ],
)
def test_lying_fatbins_give_one_line_bad_binary(data: bytes, message: str) -> None:
    with pytest.raises(BadBinary, match=message) as info:
        read_fatbin(data)
    assert "\n" not in str(info.value)


def test_section_past_end_of_file() -> None:
    with pytest.raises(BadBinary, match="runs past the end of the file"):
        read_fatbin(fatbin_blob(), 8, 1 << 20)


def test_blob_toolkit_skips_nothing_it_cannot_bound() -> None:
    blob = fatbin_blob(fatbin_entry(2, 80, CUBIN, compress="zstd"))
    src = Source(blob)
    (entries,) = walk_blobs(src, 0, len(blob), "t")
    assert blob_toolkit(src, entries) == (13, 0)


# ---- the oracle: NVIDIA's own cuobjdump (opt-in, downloads from PyPI) ---------------------------


@pytest.fixture(scope="session")
def cuobjdump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cuobjdump from PyPI's ``nvidia-cuda-cuobjdump`` wheel, unpacked into the session's temp dir."""
    where = tmp_path_factory.mktemp("cuobjdump")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(where), "nvidia-cuda-cuobjdump"],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = list(where.glob("*.whl"))
    if done.returncode or not wheels:
        # An oracle run that checks nothing must not pass: fail, as the network tests do.
        pytest.fail(f"cannot download nvidia-cuda-cuobjdump: {done.stderr.strip()[-200:]}")
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extractall(where / "x")
    tool = next((where / "x").rglob("bin/cuobjdump"))
    tool.chmod(0o755)
    return tool


def _cuobjdump_list(tool: Path, path: Path) -> list[str]:
    out = subprocess.run(
        [str(tool), "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, check=False
    ).stdout
    return [
        f"{kind} {arch}"
        for kind, arch in re.findall(r"(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)", out)
    ]


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(EXPECTED) + [f"compress_{m}" for m in COMPRESS_MODES])
def test_against_cuobjdump(cuda_sos: dict[str, Path], cuobjdump: Path, name: str) -> None:
    path = cuda_sos[name]
    # cuobjdump lists executable entries (relocatable ones only where no .nv_fatbin exists), ELF
    # before PTX, and prints neither LTO-IR nor the `f` of family-specific cubins (reference section 3).
    entries = _entries(path)
    ours = [
        f"ELF {GpuArch(e.arch.major, e.arch.minor, e.arch.suffix.replace('f', ''))}"
        for e in entries
        if e.arch.kind.value == "sm"
    ]
    ours += [f"PTX sm_{e.arch.sm}" for e in entries if e.arch.kind.value == "compute"]
    assert ours == _cuobjdump_list(cuobjdump, path)


# ---- fatbins kept as data (section 6): found by magic, 8-aligned and structurally valid ------------

MAGIC = (0xBA55ED50).to_bytes(4, "little")
REAL = fatbin_blob(
    fatbin_entry(2, 86, cubin_bytes(86, api=(12, 8)), compress="lz4"),
    fatbin_entry(1, 86, b".version 7.8\n.target sm_86\n" + bytes(5), version=(7, 8), header_size=0x50),
)


def _aligned(data: bytes) -> bytes:
    return data + bytes(-len(data) % 8)


DECOYS = [
    _aligned(b"cmpl $0x" + MAGIC),  # a magic in a string or an instruction, unaligned
    bytes(4) + REAL + bytes(4),  # a real blob at a file offset = 4 (mod 8)
    _aligned(fatbin_blob(fatbin_entry(3, 80, bytes(8)))),  # an entry of unknown kind 3
    _aligned(fatbin_blob(fatbin_entry(2, 80, bytes(8), header_size=0x44))),  # header_size not 8-aligned
    _aligned(fatbin_blob(fatbin_entry(2, 80, bytes(16)), fat_size=len(fatbin_entry(2, 80, bytes(16))) + 8)),
    struct.pack("<IHHQ", 0xBA55ED50, 2, 16, 0x48) + fatbin_entry(2, 80, bytes(8)),  # version 2
    struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 40),  # fat_size past the end
    fatbin_blob(),  # an empty blob: valid, but nothing to count
]


def test_scan_counts_only_aligned_valid_blobs() -> None:
    assert all(len(d) % 8 == 0 for d in DECOYS)  # each decoy keeps the next one where it was put
    data = b"".join(DECOYS) + REAL + bytes(16) + b"".join(reversed(DECOYS)) + REAL
    entries = scan_fatbins(data, section=".rodata")
    assert [(str(e.arch), e.section, e.toolkit) for e in entries] == [
        ("sm_86", ".rodata", (12, 8)),
        ("compute_86", ".rodata", (11, 8)),
    ] * 2
    assert scan_fatbins(b"".join(DECOYS)) == ()


def test_scan_reads_in_chunks_across_seams(monkeypatch: pytest.MonkeyPatch) -> None:
    # libcufft-like: thousands of blobs with small gaps; a tiny chunk puts blobs and magics across seams
    rng = random.Random(3)
    data = b"".join(REAL + bytes(rng.choice((0, 8, 16, 24))) for _ in range(300))
    whole = scan_fatbins(data)
    assert len(whole) == 600
    for chunk in (5, 64, 1000):
        monkeypatch.setattr(fatbin_walk, "SCAN_CHUNK", chunk)
        assert scan_fatbins(data) == whole
        assert scan_fatbins(bytes(8) + data, 8) == whole


def test_scan_region_checked() -> None:
    with pytest.raises(BadBinary, match="runs past the end of the file"):
        scan_fatbins(REAL, 8, len(REAL), section=".ldata")
    assert scan_fatbins(REAL, 8, len(REAL) - 8) == ()  # a region that starts inside a blob


def test_valid_blob_at() -> None:
    src = Source(bytes(8) + REAL)
    assert valid_blob_at(src, 8, src.size) is not None
    assert valid_blob_at(src, 8, src.size - 8) is None  # does not fit the region
    assert valid_blob_at(src, 0, src.size) is None


def test_sampled_toolkits_read_three_blobs_of_a_kind_and_every_blob_where_they_disagree() -> None:
    """doctor --env (issue 44): alike blobs of one library (the same cubin ABIs and archs) take the toolkit
    that their first, middle and last name where those agree; where they do not, each blob is read."""

    def blob(n: int, arch: int = 90) -> tuple[EntryHeader, ...]:
        return (EntryHeader(n * 0x1000, fatbin_walk.KIND_ELF, 0x40, 0x100, 0, 8, 1, arch, 0, 0x200),)

    blobs = [blob(n) for n in range(10)] + [blob(10, arch=80)]
    asked: list[int] = []

    def read(src: object, b: tuple[EntryHeader, ...]) -> tuple[int, int]:
        asked.append(b[0].offset // 0x1000)
        return (13, 2) if b[0].offset // 0x1000 == 7 else (13, 0)

    src = fatbin.Source(b"")
    assert fatbin._toolkits(src, blobs, read) == [read(src, b) for b in blobs]  # outside: each blob
    asked.clear()
    with fatbin.sampled_toolkits():
        said = fatbin._toolkits(src, blobs[:7], read)  # blobs 0..6 all say 13.0: three asked
    assert said == [(13, 0)] * 7 and sorted(asked) == [0, 3, 6]
    asked.clear()
    with fatbin.sampled_toolkits():
        said = fatbin._toolkits(src, blobs, read)  # the sm90 kind's samples are 0, 5 and 9: they agree
    assert said[7] == (13, 0) and sorted(asked) == [0, 5, 9, 10]  # blob 7's 13.2 is not seen: the bound
    blobs[9] = blob(7)  # now a sample says 13.2: every sm90 blob is read
    asked.clear()
    with fatbin.sampled_toolkits():
        said = fatbin._toolkits(src, blobs, read)
    assert said[9] == (13, 2) and said[0] == (13, 0) and len(asked) == 3 + 10 + 1


def test_sampled_toolkits_agree_with_reading_every_blob_on_the_nvcc_fixtures(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from librarian.wheel import inspect_path, sampled_toolkits
    from tests.cuda_fixtures import real_sos

    for path in real_sos(tmp_path_factory).values():
        full = inspect_path(path)
        with sampled_toolkits():
            assert inspect_path(path) == full, path.name
