"""Windows members read to the bytes (README: inspect): PE sections, fatbins, imports, torch binding.

The DLLs are built by hand as bytes (``tests.pe_builders``); pefile, an independent PE reader, is the
oracle for sections and imports.
"""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pefile
import pytest

from librarian.errors import BadBinary
from librarian.facts import BinaryFormat
from librarian.wheel.binaries import inspect_binary
from librarian.wheel.pe import read_pe
from tests.builders import assert_mutants_fail_in_one_line, make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import cubin_bytes, fatbin_blob, fatbin_entry
from tests.pe_builders import CODE, DATA, pe_dll

MSVC_C10 = (
    "?torchCheckFail@detail@c10@@YAXPEBD0IAEBV?$basic_string@DU?$char_traits@D@std@@V?$allocator@D@2@@std@@@Z"
)
FATBIN = fatbin_blob(
    fatbin_entry(2, 89, cubin_bytes(89, release="12.8")), fatbin_entry(2, 80, cubin_bytes(80, release="12.8"))
)


def dll(
    *,
    torch: list[str] | None = None,
    fatbin_in: str = ".nv_fatb",
    cudart: str = "cudart64_12.dll",
    delayed: dict[str, list[str]] | None = None,
) -> bytes:
    imports = {cudart: ["cudaLaunchKernel"], "KERNEL32.dll": ["GetProcAddress"]}
    if torch is not None:
        imports["torch_cpu.dll"] = torch
        imports["c10.dll"] = ["c10_version"]  # a C name: no binding of its own
    return pe_dll(((".text", b"\xc3" * 64, CODE), (fatbin_in, FATBIN, DATA)), imports, delay_imports=delayed)


@pytest.mark.parametrize(
    "data",
    [
        dll(),
        dll(torch=[MSVC_C10]),
        dll(fatbin_in=".data", torch=["aoti_torch_empty_strided"]),
        dll(delayed={"nvcuda.dll": ["cuInit"], "torch_cuda.dll": [MSVC_C10]}),
    ],
)
def test_sections_and_imports_agree_with_pefile(data: bytes) -> None:
    ours, oracle = read_pe(data), pefile.PE(data=data)
    assert [s.name for s in ours.sections] == [s.Name.rstrip(b"\0").decode() for s in oracle.sections]
    assert [(s.offset, s.raw_size) for s in ours.sections] == [
        (s.PointerToRawData, s.SizeOfRawData) for s in oracle.sections
    ]
    tables = [*oracle.DIRECTORY_ENTRY_IMPORT, *getattr(oracle, "DIRECTORY_ENTRY_DELAY_IMPORT", [])]
    assert ours.dlls == tuple(e.dll.decode() for e in tables)
    assert ours.imported == tuple(i.name.decode() for e in tables for i in e.imports if i.name)
    assert ours.cpu == "x86_64"


def test_a_delay_loaded_torch_import_binds_like_an_imported_one(run: Run, tmp_path: Path) -> None:
    """MSVC's /DELAYLOAD moves a DLL's imports to the delay-load table: torch is linked all the same."""
    wheel = make_wheel(tmp_path, "winkern", "0.1.0", "cp311-cp311-win_amd64",
                       {"winkern/_C.pyd": dll(delayed={"torch_cpu.dll": [MSVC_C10]})})  # fmt: skip
    result = run("inspect", str(wheel), "--json")
    assert result.code == 0, result.err
    assert "torch_cpu.dll" in result.out and "exact" in result.out


def shared_ordinal_table(descriptors: int, ordinals: int = (1 << 18) - 1) -> Callable[[int], bytes]:
    """An ``.idata`` whose ``descriptors`` import descriptors all point at one lookup table of ``ordinals``
    imports by ordinal (no names: no per-name cap is reached)."""

    def lay(va: int) -> bytes:
        table_at = 20 * (descriptors + 1)
        name_at = table_at + 8 * (ordinals + 1)
        out = bytearray()
        for _ in range(descriptors):
            out += struct.pack("<IIIII", va + table_at, 0, 0, va + name_at, va + table_at)
        out += bytes(20)
        out += struct.pack("<Q", 1 << 63 | 7) * ordinals + bytes(8)
        return bytes(out + b"evil.dll\0")

    return lay


def test_descriptors_sharing_a_huge_ordinal_table_are_read_once() -> None:
    """4,096 descriptors x 262,143 ordinals each took past 180 s; one shared table is read once now."""
    data = pe_dll(((".text", b"\xc3", CODE),), idata=shared_ordinal_table(4095))
    start = time.process_time()
    found = read_pe(data)
    assert time.process_time() - start < 20  # CPU time: about 0.2 s here; before, minutes
    assert found.dlls == ("evil.dll",) * 4095 and found.imported == ()


def test_the_lookup_entries_of_one_file_are_bounded_in_all() -> None:
    """Distinct tables each under every per-table cap still meet the file's budget: one line, at once."""

    def lay(va: int) -> bytes:
        tables = 8
        ordinals = (1 << 18) - 1
        table_at = 20 * (tables + 1)
        name_at = table_at + tables * 8 * (ordinals + 1)
        out = bytearray()
        for t in range(tables):
            at = va + table_at + t * 8 * (ordinals + 1)
            out += struct.pack("<IIIII", at, 0, 0, va + name_at, at)
        out += bytes(20)
        out += (struct.pack("<Q", 1 << 63 | 7) * ordinals + bytes(8)) * tables
        return bytes(out + b"evil.dll\0")

    with pytest.raises(BadBinary, match="more than 1048576 import lookup entries"):
        read_pe(pe_dll(((".text", b"\xc3", CODE),), idata=lay))


@pytest.mark.parametrize("section", [".nv_fatb", ".data"])
def test_device_code_in_a_dll_is_read_like_an_elf_member_s(section: str) -> None:
    facts = inspect_binary(io.BytesIO(dll(fatbin_in=section)), "pkg/_C.pyd")
    assert facts.format is BinaryFormat.PE and facts.cpu == "x86_64"
    assert [str(a) for a in facts.sass] == ["sm_80", "sm_89"] and facts.toolkit == (12, 8)
    assert facts.cudart_major == 12 and facts.cudart_library == "cudart64_12.dll"
    assert facts.embedded == ((".data",) if section == ".data" else ())


READ_ONLY = 0x40000000  # readable, and neither initialized data nor code: the data-section scan skips it


def test_a_fatbin_only_the_named_section_holds_is_read() -> None:
    """``.nv_fatb`` found by its PE name, not by the data-section scan: a section the scan never reads."""
    data = pe_dll(
        ((".text", b"\xc3" * 64, CODE), (".nv_fatb", FATBIN, READ_ONLY)), {"cudart64_12.dll": ["x"]}
    )
    facts = inspect_binary(io.BytesIO(data), "pkg/_C.pyd")
    assert [str(a) for a in facts.sass] == ["sm_80", "sm_89"] and facts.embedded == ()
    assert facts.relocatable_sass == ()


@pytest.mark.parametrize("flags", [READ_ONLY, DATA])
def test_a_fatbin_in_nv_rel_is_relocatable_code(run: Run, tmp_path: Path, flags: int) -> None:
    """``__nv_rel`` (PE's cut of ``__nv_relfatbin``: -rdc / -dlto code) is relocatable, whatever its flags:
    no SASS the driver loads, and the judgement says so."""
    data = pe_dll(((".text", b"\xc3" * 64, CODE), ("__nv_rel", FATBIN, flags)), {"cudart64_12.dll": ["x"]})
    facts = inspect_binary(io.BytesIO(data), "pkg/_C.pyd")
    assert facts.sass == () and [str(a) for a in facts.relocatable_sass] == ["sm_80", "sm_89"]
    wheel = make_wheel(tmp_path, "winkern", "0.1.0", "cp311-cp311-win_amd64", {"winkern/_C.pyd": data})
    doctor = run("doctor", str(wheel), "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.11",
                 "--platform", "win_amd64")  # fmt: skip
    assert doctor.code == 1 and "only relocatable / LTO device code" in doctor.out, doctor.out + doctor.err


@pytest.mark.parametrize(
    ("torch", "binding"),
    [(None, "does not link torch"), (["aoti_torch_empty_strided", "aoti_torch_get_device_type"], "stable ABI"),
     ([MSVC_C10, "aoti_torch_empty_strided"], f"imports {MSVC_C10[:59]}…")],
)  # fmt: skip
def test_the_torch_binding_of_a_dll(run: Run, tmp_path: Path, torch: list[str] | None, binding: str) -> None:
    whl = make_wheel(
        tmp_path / "dist",
        "kern",
        "1.0",
        "cp312-cp312-win_amd64",
        {"kern/__init__.py": b"", "kern/_C.pyd": dll(torch=torch)},
    )
    out = run("inspect", str(whl)).out
    row = next(line for line in out.splitlines() if line.startswith("  torch"))
    assert binding in row
    assert ("links c10.dll torch_cpu.dll" in row) is (torch is not None)


def test_a_windows_wheel_is_filed_and_judged_by_its_bytes(run: Run, tmp_path: Path) -> None:
    whl = make_wheel(
        tmp_path / "dist",
        "kern",
        "1.0",
        "cp312-cp312-win_amd64",
        {"kern/__init__.py": b"", "kern/_C.pyd": dll()},
    )
    seen = run("inspect", str(whl))
    assert "runs natively on sm80 sm86 sm89" in seen.out and "  OS        windows (pe)" in seen.out
    published = run("publish", str(whl), "--torch", "2.9", "--cuda", "12.8")
    assert published.code == 0 and "kern/sm89/torch2.9-cu128/" in published.out, published.err
    flags = (
        "--sm",
        "89",
        "--torch",
        "2.9",
        "--cuda",
        "12.8",
        "--python",
        "3.12",
        "--driver",
        "12.8",
        "--json",
    )
    windows = json.loads(run("doctor", str(whl), *flags, "--platform", "win_amd64").out)["wheels"][0]
    assert windows["runs"] is True and windows["native"] is True
    linux = json.loads(run("doctor", str(whl), *flags, "--platform", "manylinux_2_28_x86_64").out)["wheels"][
        0
    ]
    assert {v["demand"] for v in linux["verdicts"] if v["ok"] is False} >= {"os"}


def _mutated(data: bytes, at: int, value: bytes) -> bytes:
    out = bytearray(data)
    out[at : at + len(value)] = value
    return bytes(out)


GOOD = dll(torch=[MSVC_C10])


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (GOOD[:0x100], "truncated"),
        (_mutated(GOOD, 0x46, struct.pack("<H", 5000)), "sections, more than a PE file may have"),
        (_mutated(GOOD, 0x58, struct.pack("<H", 0x999)), "neither PE32 nor PE32+"),
        (_mutated(GOOD, 0x58 + 0x78, struct.pack("<I", 0x7FFF0000)), "is in no section"),
        (_mutated(GOOD, 0x40, b"XX"), "without a PE header"),
    ],
)
def test_a_crafted_dll_is_one_line(bad: bytes, says: str) -> None:
    with pytest.raises(BadBinary, match=says) as caught:
        inspect_binary(io.BytesIO(bad), "pkg/_C.pyd")
    assert str(caught.value).startswith("pkg/_C.pyd: ") and "\n" not in str(caught.value)


def test_mutated_dlls_raise_only_one_line_errors() -> None:
    hot = list(range(0, 0x200, 2)) + list(range(0x400, len(GOOD), 4))  # headers, section table, .idata
    assert_mutants_fail_in_one_line((GOOD,), hot, "pkg/_C.pyd")


# --- DLLs built by a compiler: mingw-w64 from tests/data/pe/kern.c (rebuild.py), nvcc's fatbin inside -------

PE_DATA = Path(__file__).resolve().parent / "data" / "pe"


@pytest.mark.parametrize(("fixture", "exact"), [("stable.pyd", False), ("exact.pyd", True)])
def test_compiled_dlls_agree_with_pefile_and_with_nvcc_s_command(fixture: str, exact: bool) -> None:
    data = (PE_DATA / fixture).read_bytes()
    oracle = pefile.PE(data=data)
    ours = read_pe(data)
    assert ours.dlls == tuple(e.dll.decode() for e in oracle.DIRECTORY_ENTRY_IMPORT)
    assert ".nv_fatb" in [s.name for s in ours.sections]
    facts = inspect_binary(io.BytesIO(data), "kern/_C.pyd")
    # multi.fatbin: nvcc -gencode arch=compute_80,code=[sm_80,compute_80] -gencode arch=compute_120f,code=[sm_120f]
    assert [str(a) for a in facts.sass] == ["sm_80", "sm_120f"] and [str(a) for a in facts.ptx] == [
        "compute_80"
    ]
    assert (
        facts.cudart_major == 13 and facts.toolkit == (13, 0) and facts.torch_libraries == ("torch_cpu.dll",)
    )
    assert bool(facts.torch_symbols) is exact


def test_a_compiled_windows_extension_end_to_end(run: Run, tmp_path: Path) -> None:
    for fixture, binding in (
        ("stable.pyd", "stable ABI"),
        ("exact.pyd", "imports ?torchCheckFail@detail@c10@@"),
    ):
        whl = make_wheel(
            tmp_path / fixture,
            "kern",
            "1.0",
            "cp312-cp312-win_amd64",
            {"kern/__init__.py": b"", "kern/_C.pyd": (PE_DATA / fixture).read_bytes()},
        )
        seen = run("inspect", str(whl)).out
        assert "compute_80; runs natively on sm80 sm86 sm89 sm120" in seen and binding in seen
    published = run(
        "publish",
        str(tmp_path / "stable.pyd" / "kern-1.0-cp312-cp312-win_amd64.whl"),
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
    )
    assert published.code == 0 and "kern/sm120/torch2.9-cu130/" in published.out, published.err
    later = run(
        "pull",
        "kern",
        "--preset",
        "windows-rtx4090",
        "--torch",
        "2.11",
        "--cuda",
        "13.0",
        "--driver",
        "13.0",
        "-o",
        "out",
    )
    assert (
        later.code == 0 and "stable ABI, needs torch >= 2.9" in later.err
    )  # the stable-ABI DLL serves later torch lines


def test_a_windows_wheel_is_judged_in_windows_words(run: Run, tmp_path: Path) -> None:
    """The DLL's own name and Windows' own error, and the reason that rules it out: a cudart64_12.dll wheel
    under a CUDA 13 torch fails on that runtime, not on the preset's CUDA 12.8 driver."""
    pyd = pe_dll(((".text", b"\xc3" * 64, CODE), (".nv_fatb", FATBIN, DATA)),
                 {"cudart64_12.dll": ["cudaLaunchKernel"], "python311.dll": ["PyModule_Create2"]})  # fmt: skip
    wheel = make_wheel(tmp_path, "winkern", "0.1.0", "cp311-cp311-win_amd64", {"winkern/_C.pyd": pyd})
    machine = ("--preset", "windows-rtx4090", "--torch", "2.9", "--python", "3.11")
    runs = run("doctor", str(wheel), *machine, "--cuda", "12.8", "--json")
    cuda = {v["demand"]: v for v in json.loads(runs.out)["wheels"][0]["verdicts"]}["cuda"]
    assert "cudart64_12.dll" in cuda["wheel_needs"] and "libcudart" not in json.dumps(cuda), cuda
    refused = run("doctor", str(wheel), *machine, "--cuda", "13.0", "--driver", "13.0", "--json")
    assert refused.code == 1
    cuda = {v["demand"]: v for v in json.loads(refused.out)["wheels"][0]["verdicts"]}["cuda"]
    assert cuda["reason"] == "links cudart64_12.dll, torch ships the CUDA 13 runtime", cuda
    assert cuda["predicted_error"].startswith("ImportError: DLL load failed while importing _C: "), cuda
    assert "cudart64_12.dll" in cuda["predicted_error"] and "shared object" not in cuda["predicted_error"]
