"""Device code outside ``.nv_fatbin`` in real wheels from PyPI (opt-in: ``pytest -m network``).

- bitsandbytes 0.42.0: ten CUDA builds, 11.0 to 12.3; the 11.0 cubins name their toolkit only in the ELF
  ``e_version`` (110), the others in EIATTR too. The member names say which CUDA built each one.
- libcufft: 23,000+ fatbin blobs kept as data (``.ldata`` in CUDA 12.8's build, ``.data`` in CUDA 11's),
  loaded with ``cuModuleLoadData``. ``cuobjdump`` lists only the ``.nv_fatbin`` blob of the ``.so``, so the
  oracle is cuobjdump on every blob a plain magic scan of the file carves out, entry for entry.
- flashinfer-cubin: 15,970 loose cubins; their names and cuobjdump (on a sample) say the arch.
"""

from __future__ import annotations

import collections
import re
import struct
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from librarian.coords import GpuArch
from librarian.facts import BinaryFormat, FatbinEntry, WheelFacts
from librarian.wheel.binaries import FATBIN_SECTIONS, _holds_data
from librarian.wheel.elf import read_elf
from librarian.wheel.fatbin import read_fatbin, scan_fatbins
from librarian.wheel.members import inspect_wheel
from tests.test_fatbin import cuobjdump  # noqa: F401  (a fixture, used by name)
from tests.test_real_wheels import _download

pytestmark = pytest.mark.network

MAGIC = struct.pack("<I", 0xBA55ED50)


@pytest.fixture(scope="session")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Wheels fetched once per session (requirement -> path)."""
    return {}


def _wheel(downloads: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, req: str) -> Path:
    if req not in downloads:
        where = tmp_path_factory.mktemp(re.sub(r"\W", "_", req))
        downloads[req] = _download(req, "manylinux2014_x86_64", where)
    return downloads[req]


def _timed_inspect(whl: Path) -> tuple[WheelFacts, float]:
    start = time.monotonic()
    facts = inspect_wheel(whl)
    return facts, time.monotonic() - start


def test_bitsandbytes_toolkit_from_e_version(
    downloads: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    whl = _wheel(downloads, tmp_path_factory, "bitsandbytes==0.42.0")
    facts = inspect_wheel(whl)
    seen = []
    for b in facts.binaries:
        m = re.search(r"libbitsandbytes_cuda(\d\d)(\d)(_nocublaslt)?\.so$", b.path)
        if m:
            assert b.toolkit == (int(m[1]), int(m[2])), f"{b.path}: toolkit {b.toolkit}"
            seen.append(f"{b.path.rsplit('/', 1)[-1]}: {b.toolkit}")
    assert len(seen) == 20 and any("cuda110.so: (11, 0)" in s for s in seen)
    print(f"{whl.name}:", *seen, sep="\n  ")


def _cuobjdump_counts(tool: Path, path: Path) -> collections.Counter[str]:
    out = subprocess.run(
        [str(tool), "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, check=False
    ).stdout
    found = re.findall(r"(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)", out)
    return collections.Counter(f"{kind} {arch}" for kind, arch in found)


def _carve(data: bytes) -> tuple[bytes, collections.Counter[str]]:
    """Every blob a plain scan finds (8-aligned magic, version 1, header 16, a fat_size that fits), and
    what its entry headers name, read straight from the reference's table (section 3)."""
    out, names, pos = bytearray(), collections.Counter[str](), data.find(MAGIC)
    while pos >= 0:
        version, hsz, size = struct.unpack_from("<HHQ", data, pos + 4)
        fits = size > 0 and size % 8 == 0 and pos + 16 + size <= len(data)
        if pos % 8 == 0 and (version, hsz) == (1, 16) and fits:
            out += data[pos : pos + 16 + size]
            entry, end = pos + 16, pos + 16 + size
            while entry < end:
                kind, _, ehsz, psize = struct.unpack_from("<HHIQ", data, entry)
                arch = struct.unpack_from("<I", data, entry + 0x1C)[0]
                flags = struct.unpack_from("<Q", data, entry + 0x28)[0]
                if kind in (1, 2):
                    suffix = "a" if flags & 0x100000 else "f" if flags & 0x200000 and kind == 1 else ""
                    names[f"{'PTX' if kind == 1 else 'ELF'} sm_{arch}{suffix}"] += 1
                entry += ehsz + psize
            pos = data.find(MAGIC, end)
        else:
            pos = data.find(MAGIC, pos + 1)
    return bytes(out), names


def _counts(entries: list[FatbinEntry]) -> collections.Counter[str]:
    # cuobjdump names executable cubins and PTX by SM, drops the `f` of cubins and ignores LTO-IR
    names = [
        f"ELF sm_{e.arch.number}{e.arch.suffix.replace('f', '')}"
        for e in entries
        if e.arch.kind.value == "sm"
    ]
    names += [f"PTX sm_{e.arch.sm}" for e in entries if e.arch.kind.value == "compute"]
    return collections.Counter(names)


@pytest.mark.parametrize(
    ("req", "member", "section"),
    [("nvidia-cufft-cu12==11.3.3.83", "nvidia/cufft/lib/libcufft.so.11", ".ldata"),
     ("nvidia-cufft-cu11==10.9.0.58", "nvidia/cufft/lib/libcufft.so.10", ".data")],
)  # fmt: skip
def test_libcufft_fatbins_kept_as_data(
    downloads: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    cuobjdump: Path,  # noqa: F811  (the fixture imported above)
    req: str,
    member: str,
    section: str,
) -> None:
    whl = _wheel(downloads, tmp_path_factory, req)
    facts, seconds = _timed_inspect(whl)
    (lib,) = [b for b in facts.binaries if b.path == member]
    assert lib.embedded == (section,) and lib.ptx

    where = tmp_path_factory.mktemp("cufft")
    with zipfile.ZipFile(whl) as zf:
        zf.extract(member, where)
    so = where / member
    data = so.read_bytes()
    elf = read_elf(data)
    entries: list[FatbinEntry] = []
    for sec in elf.sections:
        if sec.name in FATBIN_SECTIONS:
            relocatable = FATBIN_SECTIONS[sec.name]
            entries += read_fatbin(data, sec.offset, sec.size, relocatable=relocatable, section=sec.name)
        elif _holds_data(sec):
            entries += scan_fatbins(data, sec.offset, sec.size, section=sec.name)
    executable = [e for e in entries if not e.relocatable]
    carved, plain = _carve(data)
    assert _counts(entries) == plain  # the plain scan carves the __nv_relfatbin blobs too
    (where / "carved.fatbin").write_bytes(carved)
    theirs = _cuobjdump_counts(cuobjdump, where / "carved.fatbin")
    if theirs or "sm_35" not in str(plain):  # cuobjdump 13 refuses files with sm_35 (CUDA 11's cufft)
        assert _counts(entries) == theirs
    assert {str(a) for a in lib.sass} == {e.split()[1] for e in _counts(executable) if e.startswith("ELF")}
    so_only = _cuobjdump_counts(cuobjdump, so)
    found = sum(1 for e in entries if e.section == section)
    assert found > 10_000  # 23,531 and 22,346, one entry per blob
    registered = {e.arch for e in entries if e.section == ".nv_fatbin" and e.arch.kind.value == "sm"}
    if section == ".ldata":  # CUDA 12.8's libcufft registers sm_52 alone; CUDA 11's has every arch in both
        assert set(lib.sass) > registered and GpuArch.parse("sm_100") in lib.sass
    print(
        f"\n{whl.name}: {lib.path} {len(data) >> 20} MiB, inspected in {seconds:.1f} s;",
        f"{len(entries)} entries ({found} in {section});",
        f"cuobjdump lists {sum(so_only.values())} in the .so,",
        f"{sum(theirs.values())} in the carved blobs; SASS {' '.join(str(a) for a in lib.sass)};",
        f"PTX {' '.join(str(a) for a in lib.ptx)}; toolkit {lib.toolkit}",
    )


def test_flashinfer_loose_cubins(
    downloads: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    cuobjdump: Path,  # noqa: F811
) -> None:
    whl = _wheel(downloads, tmp_path_factory, "flashinfer-cubin==0.6.13")  # 458 MB, 15,970 cubins
    with zipfile.ZipFile(whl) as zf:
        names = [n for n in zf.namelist() if n.endswith(".cubin")]
    facts, seconds = _timed_inspect(whl)
    binaries = facts.binaries
    assert [b.path for b in binaries] == names
    by_name = 0
    for b in binaries:
        assert b.format is BinaryFormat.CUDA and b.cpu is None and len(b.sass) == 1 and b.toolkit
        m = re.search(r"[sS]m_?(\d+)([af]?)", b.path.rsplit("/", 1)[-1])
        if (
            m
        ):  # `f` from the tkinfo note's -arch, or the later e_flags layout's 0x4 (librarian/wheel/cubin.py)
            assert str(b.sass[0]) == f"sm_{m[1]}{m[2]}", b.path
            by_name += 1
    where = tmp_path_factory.mktemp("flashinfer")
    sample = binaries[:: max(1, len(binaries) // 150)]
    with zipfile.ZipFile(whl) as zf:
        for b in sample:
            zf.extract(b.path, where)
            listed = _cuobjdump_counts(cuobjdump, where / b.path)
            # cuobjdump --list-elf names a family-specific cubin by its plain SM (it reads only e_flags)
            plain = str(b.sass[0]).removesuffix("f")
            assert listed == collections.Counter([f"ELF {plain}"]), b.path
    archs = collections.Counter(str(b.sass[0]) for b in binaries)
    assert archs["sm_100f"] >= 13_646  # every cubin whose own tkinfo says -arch sm_100f
    print(
        f"\n{whl.name}: {len(binaries)} cubins in {seconds:.1f} s; {dict(archs)};",
        f"toolkits {dict(collections.Counter(b.toolkit for b in binaries))};",
        f"{by_name} checked against their names, {len(sample)} against cuobjdump",
    )
