"""Windows members read to the bytes (issue 21, first part): PE sections, fatbins, imports, torch binding.

The DLLs are built by hand as bytes (``tests.pe_builders``); pefile, an independent PE reader, is the
oracle for sections and imports.
"""

from __future__ import annotations

import io
import json
import struct
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
    *, torch: list[str] | None = None, fatbin_in: str = ".nv_fatb", cudart: str = "cudart64_12.dll"
) -> bytes:
    imports = {cudart: ["cudaLaunchKernel"], "KERNEL32.dll": ["GetProcAddress"]}
    if torch is not None:
        imports["torch_cpu.dll"] = torch
        imports["c10.dll"] = ["c10_version"]  # a C name: no binding of its own
    return pe_dll(((".text", b"\xc3" * 64, CODE), (fatbin_in, FATBIN, DATA)), imports)


@pytest.mark.parametrize(
    "data", [dll(), dll(torch=[MSVC_C10]), dll(fatbin_in=".data", torch=["aoti_torch_empty_strided"])]
)
def test_sections_and_imports_agree_with_pefile(data: bytes) -> None:
    ours, oracle = read_pe(data), pefile.PE(data=data)
    assert [s.name for s in ours.sections] == [s.Name.rstrip(b"\0").decode() for s in oracle.sections]
    assert [(s.offset, s.raw_size) for s in ours.sections] == [
        (s.PointerToRawData, s.SizeOfRawData) for s in oracle.sections
    ]
    assert ours.dlls == tuple(e.dll.decode() for e in oracle.DIRECTORY_ENTRY_IMPORT)
    assert ours.imported == tuple(
        i.name.decode() for e in oracle.DIRECTORY_ENTRY_IMPORT for i in e.imports if i.name
    )
    assert ours.cpu == "x86_64"


@pytest.mark.parametrize("section", [".nv_fatb", ".data"])
def test_device_code_in_a_dll_is_read_like_an_elf_member_s(section: str) -> None:
    facts = inspect_binary(io.BytesIO(dll(fatbin_in=section)), "pkg/_C.pyd")
    assert facts.format is BinaryFormat.PE and facts.cpu == "x86_64"
    assert [str(a) for a in facts.sass] == ["sm_80", "sm_89"] and facts.toolkit == (12, 8)
    assert facts.cudart_major == 12 and facts.cudart_library == "cudart64_12.dll"
    assert facts.embedded == ((".data",) if section == ".data" else ())


@pytest.mark.parametrize(
    ("torch", "binding"),
    [(None, "does not link torch"), (["aoti_torch_empty_strided", "torch_call_dispatcher"], "stable ABI"),
     ([MSVC_C10, "aoti_torch_empty_strided"], f"imports {MSVC_C10}")],
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
    assert (
        "  GPU arch  runs natively on sm80 sm86 sm89" in seen.out and "  OS        windows (pe)" in seen.out
    )
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
        assert "runs natively on sm80 sm86 sm89 sm120; PTX compute_80" in seen and binding in seen
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
        later.code == 0 and "stable ABI since 2.9" in later.err
    )  # the stable-ABI DLL serves later torch lines
