"""librarian.wheel.binaries: facts from wheels and bare binaries, unsafe zips, claim mismatches, fuzzing."""

from __future__ import annotations

import io
import json
import random
import struct
import time
from pathlib import Path

import pytest

from librarian.coords import GpuArch, WheelName
from librarian.demands import Wheel, claims
from librarian.errors import BadBinary, BadWheel
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts, facts_from_json, facts_to_json
from librarian.wheel import members as inspection
from librarian.wheel.binaries import inspect_binary, is_device_code, is_native
from librarian.wheel.members import inspect_path, inspect_wheel
from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import (
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    SHT_PROGBITS,
    cubin_bytes,
    elf_bytes,
    fatbin_blob,
    fatbin_entry,
    fixtures_toolkit,
    pe_bytes,
    real_sos,
    so_with_fatbin,
    without_section_headers,
)

TAGS = "cp312-cp312-linux_x86_64"


@pytest.fixture(scope="session")
def cuda_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc-built fixtures (checked in; rebuilt once per session when asked)."""
    return real_sos(tmp_path_factory)


def _archs(*names: str) -> tuple[GpuArch, ...]:
    return tuple(GpuArch.parse(n) for n in names)


def test_wheel_with_real_members(tmp_path: Path, cuda_sos: dict[str, Path]) -> None:
    files = {
        "tinykern/_C.so": cuda_sos["multi"].read_bytes(),
        "tinykern/_rdc.so.1": cuda_sos["rdc"].read_bytes(),
        "tinykern/special.so": cuda_sos["special"].read_bytes(),
        "tinykern/__init__.py": b"",
    }
    facts = inspect_wheel(make_wheel(tmp_path, files=files, tags=TAGS))
    c, rdc, special = facts.binaries
    assert (c.path, c.format, c.cpu) == ("tinykern/_C.so", BinaryFormat.ELF, "x86_64")
    assert c.sass == _archs("sm_75", "sm_80", "sm_86", "sm_89")  # duplicates folded, sorted
    assert c.ptx == _archs("compute_89")
    assert rdc.sass == _archs("sm_80") and rdc.ptx == ()
    assert rdc.relocatable_sass == _archs("sm_80") and rdc.relocatable_ptx == _archs("compute_80")
    assert special.sass == _archs("sm_90a", "sm_100f", "sm_120f")
    assert facts.toolkit == fixtures_toolkit() and c.cudart_major == fixtures_toolkit()[0]
    assert c.glibc is not None and c.glibc >= (2, 2)
    assert set(facts.archs) == {*c.sass, *c.ptx, *rdc.sass, *special.sass, *special.ptx}


def test_bare_so_and_stripped(cuda_sos: dict[str, Path]) -> None:
    (facts,) = inspect_path(cuda_sos["stripped"]).binaries
    assert facts.sass == _archs("sm_75") and facts.toolkit == fixtures_toolkit()
    assert facts.glibc == (2, 34) and "libc.so.6" in facts.needed
    assert inspect_path(cuda_sos["ptx"]).binaries[0].ptx == _archs("compute_80")


def test_dynamic_facts_and_torch_symbols() -> None:
    data = elf_bytes(
        needed=("libc10.so", "libtorch_cpu.so", "libc.so.6"),
        soname="_C.so",
        runpath="$ORIGIN/../torch/lib",
        verneed={
            "libc.so.6": ("GLIBC_2.17", "GLIBC_2.32"),
            "libstdc++.so.6": ("GLIBCXX_3.4.29", "CXXABI_1.3.9"),
        },
        symbols={
            "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs": False,
            "_ZNK2at10TensorBase5dtypeEv": False,
            "_ZTVN5torch8autograd12AutogradMetaE": False,
            "_ZN6caffe28TypeMeta": False,
            "malloc": False,
            "_ZNSt6vectorIiE": False,
            "_ZN3c107defined": True,
            "PyInit__C": True,
        },
    )
    facts = inspect_binary(io.BytesIO(data), "pkg/_C.so")
    assert facts.torch_symbols == (
        "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
        "_ZN6caffe28TypeMeta",
        "_ZNK2at10TensorBase5dtypeEv",
        "_ZTVN5torch8autograd12AutogradMetaE",
    )
    assert facts.links_torch and facts.soname == "_C.so" and facts.rpath == ("$ORIGIN/../torch/lib",)
    assert (facts.glibc, facts.glibcxx, facts.cxxabi) == ((2, 32), (3, 4, 29), (1, 3, 9))
    assert not facts.has_device_code


def test_hand_built_members_pe_aarch64_lz4(tmp_path: Path) -> None:
    lz4_blob = fatbin_blob(fatbin_entry(2, 86, cubin_bytes(86, api=(12, 8)), compress="lz4"))
    files = {
        "pkg/_C.pyd": pe_bytes(),
        "pkg/_arm.so": elf_bytes(machine=183),
        "pkg/_k.so": so_with_fatbin(lz4_blob),
        "pkg/_rel.so": so_with_fatbin(lz4_blob, name="__nv_relfatbin"),
        "pkg/notes.txt": b"not native",
    }
    facts = inspect_wheel(make_wheel(tmp_path, name="pkg", files=files, tags=TAGS))
    pyd, arm, k, rel = facts.binaries
    assert (pyd.format, pyd.cpu) == (BinaryFormat.PE, "x86_64")
    assert (arm.format, arm.cpu) == (BinaryFormat.ELF, "aarch64")
    assert k.sass == _archs("sm_86") and k.toolkit == (12, 8)
    assert rel.sass == () and rel.relocatable_sass == _archs("sm_86")


def test_member_names() -> None:
    assert all(map(is_native, ["a/_C.so", "a/libx.so.12", "a/libx.so.12.1", "a/_C.pyd", "a/x.dylib"]))
    assert not any(map(is_native, ["a/x.py", "a/so.txt", "a/x.so.bak", "a/x.sox"]))


def test_errors_name_the_member(tmp_path: Path) -> None:
    good = elf_bytes(needed=("libc.so.6",))
    shoff = struct.unpack_from("<Q", good, 0x28)[0]
    wheel = make_wheel(tmp_path, name="pkg", files={"pkg/_C.so": good[: shoff + 10]}, tags=TAGS)
    with pytest.raises(BadBinary) as info:
        inspect_wheel(wheel)
    assert str(info.value).startswith(f"{wheel.name}!pkg/_C.so: truncated section header table")
    bad_fatbin = so_with_fatbin(fatbin_blob(fatbin_entry(2, 80, b"x" * 8), fat_size=4096))
    wheel = make_wheel(tmp_path / "b", name="pkg", files={"pkg/_C.so": bad_fatbin}, tags=TAGS)
    with pytest.raises(
        BadBinary, match=rf"^{wheel.name}!pkg/_C.so: .nv_fatbin: blob at 0x[0-9a-f]+ has fat_size"
    ):
        inspect_wheel(wheel)


def test_unsafe_zips(tmp_path: Path) -> None:
    evil = make_wheel(tmp_path / "a", name="pkg", files={"../evil.so": elf_bytes()}, tags=TAGS)
    with pytest.raises(BadWheel, match=r"!\.\./evil\.so: unsafe member name"):
        inspect_wheel(evil)
    bomb = make_wheel(
        tmp_path / "b", name="pkg", files={"pkg/_C.so": elf_bytes() + bytes(32 << 20)}, tags=TAGS
    )
    with pytest.raises(BadWheel, match=r"!pkg/_C.so: compresses \d+:1 \(zip bomb\?\)"):
        inspect_wheel(bomb)
    # a central directory that under-declares the member's size: zipfile stops early, the CRC fails
    lying = make_wheel(tmp_path / "c", name="pkg", files={"pkg/_C.so": elf_bytes()}, tags=TAGS)
    raw = bytearray(lying.read_bytes())
    cd = next(
        i
        for i in range(len(raw))
        if raw.startswith(b"PK\x01\x02", i) and raw[i + 46 : i + 55] == b"pkg/_C.so"
    )
    struct.pack_into("<I", raw, cd + 24, 100)
    lying.write_bytes(bytes(raw))
    with pytest.raises(BadWheel, match=r"!pkg/_C.so: cannot inflate"):
        inspect_wheel(lying)
    (tmp_path / "d.whl").write_bytes(b"not a zip")
    with pytest.raises(BadWheel, match="d.whl: not a readable zip"):
        inspect_wheel(tmp_path / "d.whl")


def _facts(cpu: str = "x86_64", fmt: BinaryFormat = BinaryFormat.ELF, **kw: object) -> WheelFacts:
    return WheelFacts("w.whl", (BinaryFacts(path="pkg/_C.so", format=fmt, cpu=cpu, **kw),))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("filename", "facts", "problem"),
    [
        ("p-1.0-cp312-cp312-manylinux_2_24_x86_64.whl", _facts(glibc=(2, 32)),
         "platform manylinux_2_24_x86_64 promises glibc 2.24, but pkg/_C.so needs GLIBC_2.32"),
        ("p-1.0-cp312-cp312-manylinux2014_x86_64.whl", _facts(glibc=(2, 28)), "promises glibc 2.17"),
        ("p-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl", _facts(toolkit=(13, 0)),
         "label says CUDA 12.8, device code built by CUDA 13.0"),
        ("p-1.0+cu128-cp312-cp312-linux_x86_64.whl", _facts(needed=("libcudart.so.13",)),
         "label says CUDA 12.8, pkg/_C.so links libcudart.so.13"),
        ("p-1.0-cp312-cp312-linux_x86_64.whl", _facts(cpu="aarch64"),
         "platform linux_x86_64, but pkg/_C.so is aarch64"),
        ("p-1.0-cp312-cp312-linux_x86_64.whl", _facts(fmt=BinaryFormat.PE),
         "platform linux_x86_64, but pkg/_C.so is a PE binary"),
        ("p-1.0-cp312-cp312-win_amd64.whl", _facts(cpu="i686", fmt=BinaryFormat.PE),
         "platform win_amd64, but pkg/_C.so is i686"),
        ("p-1.0-py3-none-any.whl", _facts(), "platform any, but pkg/_C.so is a native binary"),
    ],
)  # fmt: skip
def test_claim_mismatches(filename: str, facts: WheelFacts, problem: str) -> None:
    problems = claim_mismatches(WheelName.parse(filename), facts)
    assert len(problems) == 1 and problem in problems[0]


@pytest.mark.parametrize(
    ("filename", "facts"),
    [
        ("p-1.0+cu128torch2.8-cp312-cp312-manylinux_2_28_x86_64.whl",
         _facts(glibc=(2, 28), toolkit=(12, 9), needed=("libcudart.so.12",))),
        ("p-1.0-cp312-cp312-win_amd64.whl", _facts(fmt=BinaryFormat.PE)),
        ("p-1.0-cp312-cp312-macosx_11_0_universal2.whl", _facts(cpu="universal2", fmt=BinaryFormat.MACHO)),
        ("p-1.0-cp312-cp312-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", _facts(cpu="aarch64")),
    ],
)  # fmt: skip
def test_claims_that_hold(filename: str, facts: WheelFacts) -> None:
    assert claim_mismatches(WheelName.parse(filename), facts) == []


def claim_mismatches(name: WheelName, facts: WheelFacts) -> list[str]:
    return [str(c) for c in claims(Wheel(name, facts))]


def _mutate(rng: random.Random, data: bytearray, hot: list[int]) -> None:
    for _ in range(rng.randint(1, 4)):
        pos = rng.choice(hot) + rng.randint(-8, 64) if rng.random() < 0.8 else rng.randrange(len(data))
        pos = min(max(pos, 0), len(data) - 8)
        how = rng.random()
        if how < 0.4:
            data[pos] = rng.randrange(256)
        elif how < 0.8:
            value = rng.choice(
                [0, 1, 0x40, 0xFFFF, 0xFFFFFFFF, len(data), len(data) + 8, 1 << 62, rng.getrandbits(64)]
            )
            struct.pack_into("<Q", data, pos, value & (2**64 - 1))
        else:
            data[pos:] = data[pos : pos + rng.randrange(len(data) - pos)]  # truncate


# A fixed count, not a time: the same mutants on every machine. 1,000 take well under a second; the slow
# run (what 8 seconds gave on a quiet machine) is opt-in.
@pytest.mark.parametrize("count", [1000, pytest.param(25_000, marks=pytest.mark.hostile_slow)])
def test_fuzz_real_fixtures_raise_only_bad_binary(cuda_sos: dict[str, Path], count: int) -> None:
    """Mutated real bytes, focused on headers and tables: facts or one-line BadBinary, nothing else."""
    from librarian.wheel.elf import read_elf

    rng = random.Random(1234)
    seeds = []
    for name in ("compress_size", "compress_speed", "rdc", "special", "debug"):
        data = cuda_sos[name].read_bytes()
        elf = read_elf(data)
        hot = (
            [0, 0x20, 0x28, 0x3A]
            + [s.offset for s in elf.sections if s.size]
            + list(range(struct.unpack_from("<Q", data, 0x28)[0], len(data), 64))
        )
        seeds.append((data, hot))
    cases = raised = 0
    while cases < count:
        data, hot = rng.choice(seeds)
        mutated = bytearray(data)
        _mutate(rng, mutated, hot)
        try:
            inspect_binary(io.BytesIO(bytes(mutated)), "pkg/_C.so")
        except BadBinary as e:
            assert "\n" not in str(e) and str(e).startswith("pkg/_C.so: ")
            raised += 1
        cases += 1
    assert cases == count and raised > cases // 20  # the mutations do reach the parsers


# ---- device code outside .nv_fatbin: loose members, fatbins kept as data, no section headers ------

LZ4_BLOB = fatbin_blob(fatbin_entry(2, 86, cubin_bytes(86, api=(12, 8)), compress="lz4"))
PTX70 = b".version 7.0\n.target sm_70\n" + bytes(5)
DATA_BLOB = fatbin_blob(
    fatbin_entry(2, 90, cubin_bytes(90, e_version=118)), fatbin_entry(1, 70, PTX70, version=(7, 0))
)


def test_wheel_with_loose_device_code(tmp_path: Path, cuda_sos: dict[str, Path]) -> None:
    files = {
        "pkg/cubins/k.sm90a.cubin": cuda_sos["sm90a.cubin"].read_bytes(),
        "pkg/cubins/k.fatbin": cuda_sos["multi.fatbin"].read_bytes(),
        "pkg/ptx/K.PTX": cuda_sos["sm120f.ptx"].read_bytes(),
        "pkg/_C.so": cuda_sos["multi"].read_bytes(),
        "pkg/cubins/k.cubin.lock": b"",
        "pkg/__init__.py": b"",
    }
    facts = inspect_wheel(make_wheel(tmp_path, name="pkg", files=files, tags="py3-none-any"))
    cubin, fat, ptx, so = facts.binaries
    for b in (cubin, fat, ptx):
        assert (b.format, b.cpu, b.toolkit, b.needed) == (BinaryFormat.CUDA, None, fixtures_toolkit(), ())
    assert (cubin.path, cubin.sass, cubin.ptx) == ("pkg/cubins/k.sm90a.cubin", _archs("sm_90a"), ())
    assert (fat.sass, fat.ptx) == (_archs("sm_80", "sm_120f"), _archs("compute_80"))
    assert (ptx.sass, ptx.ptx) == ((), _archs("compute_120f"))
    assert so.format is BinaryFormat.ELF and so.embedded == ()
    assert len([b for b in facts.binaries if b.has_device_code]) == 4
    assert is_device_code("a/b.cubin") and is_device_code("a/b.FATBIN")
    assert not is_device_code("a/b.cubin.lock") and not is_native("a/b.cubin")


def test_fatbins_kept_as_data_count_as_device_code() -> None:
    # libcufft's pattern: blobs in .ldata, loaded with cuModuleLoadData; a blob in code does not count
    data = elf_bytes(
        needed=("libc.so.6",),
        sections=(
            (".nv_fatbin", SHT_PROGBITS, LZ4_BLOB),
            (".text", SHT_PROGBITS, DATA_BLOB),
            (".ldata", SHT_PROGBITS, bytes(24) + DATA_BLOB + bytes(8) + DATA_BLOB),
            (".comment", SHT_PROGBITS, DATA_BLOB),
        ),  # not allocated: not loaded, not counted
        flags={".nv_fatbin": SHF_ALLOC, ".text": SHF_ALLOC | SHF_EXECINSTR, ".ldata": SHF_WRITE | SHF_ALLOC},
    )
    facts = inspect_binary(io.BytesIO(data), "nvidia/cufft/lib/libcufft.so.11")
    assert facts.sass == _archs("sm_86", "sm_90") and facts.ptx == _archs("compute_70")
    assert facts.toolkit == (12, 8) and facts.embedded == (".ldata",) and facts.needed == ("libc.so.6",)
    plain = inspect_binary(io.BytesIO(so_with_fatbin(LZ4_BLOB)), "pkg/_C.so")
    assert plain.embedded == () and plain.sass == _archs("sm_86")


def test_elf_without_section_headers_is_scanned_whole() -> None:
    stripped = without_section_headers(so_with_fatbin(b"\x50\xed\x55\xba" + bytes(4) + LZ4_BLOB))
    facts = inspect_binary(io.BytesIO(stripped), "pkg/_C.so")
    assert facts.sass == _archs("sm_86") and facts.embedded == ("(whole file)",)
    assert inspect_binary(io.BytesIO(without_section_headers(elf_bytes())), "x.so").sass == ()


def test_truncated_loose_cubin_is_one_line(tmp_path: Path, run: Run) -> None:
    cubin = cubin_bytes(80, api=(12, 8))
    wheel = make_wheel(tmp_path, name="pkg", files={"pkg/k.cubin": cubin[:-10]}, tags="py3-none-any")
    with pytest.raises(BadBinary, match=rf"^{wheel.name}!pkg/k.cubin: truncated section header table"):
        inspect_wheel(wheel)
    result = run("inspect", str(wheel))
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"librarian: error: {wheel.name}!pkg/k.cubin: truncated")
    assert result.err.count("\n") == 1
    assert "Traceback" not in result.err


def test_thousands_of_tiny_cubins_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cubins = [
        cubin_bytes(100, abi=8, release="12.9"),
        cubin_bytes(90, api=(12, 4)),
        cubin_bytes(100, abi=8, release="12.9", arch_specific="flags"),
    ]
    files = {f"pkg/cubins/{i:05d}/k.cubin": cubins[i % 3] for i in range(3000)}
    wheel = make_wheel(tmp_path, name="pkg", files=files, tags="py3-none-any")

    def no_temp_files() -> None:
        raise AssertionError("a temporary file for a small member")

    monkeypatch.setattr(inspection.tempfile, "TemporaryFile", no_temp_files)
    start = time.process_time()  # CPU time, all threads: the suite's other workers do not stretch it
    facts = inspect_wheel(wheel)
    elapsed = time.process_time() - start
    assert len(facts.binaries) == 3000 and len([b for b in facts.binaries if b.has_device_code]) == 3000
    assert {b.sass for b in facts.binaries} == {_archs("sm_100"), _archs("sm_100a"), _archs("sm_90")}
    assert {b.toolkit for b in facts.binaries} == {(12, 9), (12, 4)}
    assert elapsed < 20, f"{elapsed:.1f} s of CPU for 3000 tiny cubins"  # ~1 s


def test_big_members_are_spooled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"pkg/_C.so": so_with_fatbin(LZ4_BLOB), "pkg/k.cubin": cubin_bytes(80, e_version=110)}
    wheel = make_wheel(tmp_path, name="pkg", files=files, tags="py3-none-any")
    in_memory = inspect_wheel(wheel)
    monkeypatch.setattr(inspection, "SMALL_MEMBER", 0)
    assert inspect_wheel(wheel) == in_memory
    assert in_memory.binaries[1].sass == _archs("sm_80") and in_memory.binaries[1].toolkit == (11, 0)


def test_bare_loose_files(tmp_path: Path) -> None:
    (tmp_path / "k.ptx").write_bytes(b".version 8.8\n.target sm_100f\n")
    (facts,) = inspect_path(tmp_path / "k.ptx").binaries
    assert (facts.format, facts.ptx, facts.toolkit) == (BinaryFormat.CUDA, _archs("compute_100f"), (12, 9))


def test_embedded_sections_survive_the_index() -> None:
    facts = WheelFacts(
        "w.whl",
        (
            BinaryFacts(
                path="lib/libcufft.so.11",
                format=BinaryFormat.ELF,
                cpu="x86_64",
                sass=_archs("sm_90"),
                embedded=(".ldata",),
            ),
            BinaryFacts(
                path="k.cubin", format=BinaryFormat.CUDA, cpu=None, sass=_archs("sm_100a"), toolkit=(12, 9)
            ),
        ),
    )
    data = facts_to_json(facts)
    assert facts_from_json("w.whl", json.loads(json.dumps(data))) == facts
    binaries = data["binaries"]
    assert isinstance(binaries, list) and "embedded" not in binaries[1]  # only where there are any
    del binaries[0]["embedded"]  # an index written before the field: still readable
    assert facts_from_json("w.whl", data).binaries[0].embedded == ()


def test_loose_device_code_claims_no_platform() -> None:
    cubin = BinaryFacts(path="pkg/k.cubin", format=BinaryFormat.CUDA, cpu=None, sass=_archs("sm_90"))
    for tags in ("py3-none-any", "cp312-cp312-manylinux_2_28_x86_64", "cp312-cp312-win_amd64"):
        assert claim_mismatches(WheelName.parse(f"p-1.0-{tags}.whl"), WheelFacts("w.whl", (cubin,))) == []


def test_members_read_in_parallel_come_back_in_order(tmp_path: Path, cuda_sos: dict[str, Path]) -> None:
    names = ("multi", "special", "rdc", "ptx", "sm75", "two_tu")
    files = {f"pkg/_{i}_{n}.so": cuda_sos[n].read_bytes() for i, n in enumerate(names * 3)}
    whl = make_wheel(tmp_path, files=files, tags=TAGS)
    one = inspect_wheel(whl, jobs=1)
    assert inspect_wheel(whl, jobs=4) == one and inspect_wheel(whl) == one
    assert [b.path for b in one.binaries] == list(files)


def test_the_first_bad_member_in_order_raises_however_many_threads(
    tmp_path: Path, cuda_sos: dict[str, Path]
) -> None:
    good = cuda_sos["multi"].read_bytes()
    files = {"pkg/a.so": good, "pkg/b.so": good[:4096], "pkg/c.so": good, "pkg/d.so": b"\x7fELF" + b"\0" * 8}
    whl = make_wheel(tmp_path, files=files, tags=TAGS)
    for jobs in (1, 2, 4):
        with pytest.raises(BadBinary, match=r"!pkg/b\.so: "):
            inspect_wheel(whl, jobs=jobs)
