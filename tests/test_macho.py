"""macOS members read to the bytes (README: inspect): the dylibs a Mach-O file loads and the symbols it imports.

The files are built by hand (``tests.macho_builders``), thin and universal2; macholib, an independent
Mach-O reader, is the oracle for the load commands.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import time
from pathlib import Path

import pytest
from macholib.mach_o import LC_LOAD_DYLIB
from macholib.MachO import MachO

from librarian.errors import BadBinary
from librarian.facts import BinaryFormat
from librarian.wheel.binaries import inspect_binary
from librarian.wheel.macho import read_macho
from tests.builders import assert_mutants_fail_in_one_line, make_wheel
from tests.conftest import Run
from tests.macho_builders import CPU_ARM64, CPU_X86_64, thin, universal

C10 = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"
TORCH = ("@rpath/libtorch_cpu.dylib", "@rpath/libc10.dylib")
EXACT = thin(CPU_ARM64, TORCH, (C10, "PyObject_GetAttr"), ("PyInit__C",))
STABLE = thin(CPU_X86_64, TORCH, ("aoti_torch_empty_strided", "aoti_torch_get_device_type"))
UNIVERSAL = universal((CPU_X86_64, STABLE), (CPU_ARM64, EXACT))


@pytest.mark.parametrize("data", [EXACT, STABLE, UNIVERSAL])
def test_dylibs_agree_with_macholib(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "_C.so"
    path.write_bytes(data)
    oracle = [
        lc[2].split(b"\0")[0].decode()
        for h in MachO(str(path)).headers
        for lc in h.commands
        if lc[0].cmd == LC_LOAD_DYLIB
    ]
    assert read_macho(data).dylibs == tuple(dict.fromkeys(oracle))  # install names whole: @rpath/libc10.dylib


@pytest.mark.parametrize(
    ("data", "cpu", "exact"),
    [(EXACT, "aarch64", True), (STABLE, "x86_64", False), (UNIVERSAL, "universal2", True)],
)
def test_a_mach_o_member_s_torch_linkage_and_binding(data: bytes, cpu: str, exact: bool) -> None:
    facts = inspect_binary(io.BytesIO(data), "pkg/_C.so")
    assert facts.format is BinaryFormat.MACHO and facts.cpu == cpu and not facts.has_device_code
    assert facts.links_torch and facts.torch_libraries == TORCH  # as the install names say, @rpath/ kept
    assert facts.torch_symbols == ((C10,) if exact else ())  # __ZN3c10... read as the C++ name


def test_a_macos_wheel_files_no_cuda_cell(run: Run, tmp_path: Path) -> None:
    whl = make_wheel(
        tmp_path / "dist",
        "macvision",
        "0.24.0",
        "cp312-cp312-macosx_11_0_arm64",
        {"macvision/__init__.py": b"", "macvision/_C.so": EXACT},
    )
    seen = run("inspect", str(whl)).out
    said = "c10::detail::torchCheckFail(…)" if shutil.which("c++filt") else C10  # demangled where it can be
    assert (
        "  GPU arch  no GPU code" in seen
        and "  OS        macos (macho)" in seen
        and f"imports {said}" in seen
    )
    for flags in (("--refuse-macos",), ("--sm", "80", "--refuse-macos")):
        refused = run("publish", str(whl), "--torch", "2.9", "--cuda", "12.8", *flags)
        assert refused.code == 2 and "macOS has no CUDA: it files no CUDA cell" in refused.err, refused
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))


def test_a_macos_wheel_among_a_farms_wheels_is_skipped_with_one_warning(run: Run, tmp_path: Path) -> None:
    """A farm builds every OS into one dist/: the macOS wheel is skipped, the rest filed."""
    mac = make_wheel(tmp_path / "dist", "macvision", "0.24.0", "cp312-cp312-macosx_11_0_arm64",
                     {"macvision/__init__.py": b"", "macvision/_C.so": EXACT})  # fmt: skip
    linux = make_wheel(tmp_path / "dist", "macvision", "0.24.0", "cp312-cp312-linux_x86_64")
    done = run(
        "publish", str(mac), str(linux), "--torch", "2.9", "--cuda", "12.8", "--sm", "89", "--trust-sm"
    )
    assert done.code == 0, done.err
    assert (
        done.err.count("\n") == 1
        and "a macOS wheel (macOS has no CUDA: no cell to file it in); skipped" in done.err
    )
    stored = [p.name for p in (tmp_path / "wheelhouse").rglob("*.whl")]
    assert stored == ["macvision-0.24.0+cu128torch2.9-cp312-cp312-linux_x86_64.whl"]


def test_mutated_mach_o_files_raise_only_one_line_errors() -> None:
    assert_mutants_fail_in_one_line((EXACT, UNIVERSAL), list(range(4400)), "pkg/_C.so")


def test_a_crafted_universal_file_is_one_line() -> None:
    bad = bytearray(UNIVERSAL)
    struct.pack_into(">I", bad, 8 + 8, 0x7FFFFFF0)  # the first slice's offset past the end
    with pytest.raises(BadBinary, match="runs past the end of the file"):
        inspect_binary(io.BytesIO(bytes(bad)), "pkg/_C.so")


def names_into_one_table(symbols: int, table: int) -> bytes:
    """A Mach-O whose ``symbols`` undefined symbols all point into one ``table``-byte string table with no
    NUL (each name read to the table's end: a fresh copy of the whole table per symbol, before)."""
    header_size, commands_size = 32, 24
    symoff = header_size + commands_size
    stroff = symoff + 16 * symbols
    rows = b"".join(struct.pack("<IBBHQ", 1 + (i % 7), 0x01, 0, 0, 0) for i in range(symbols))
    command = struct.pack("<IIIIII", 0x2, 24, symoff, symbols, stroff, table)
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, CPU_ARM64, 0, 8, 1, commands_size, 0, 0)
    return header + command + rows + b"_" * table


def test_names_into_one_long_string_table_cost_no_copy_of_it() -> None:
    """300 symbols into a 4 MiB string table without NUL took 20 s and 4.7 GB; now one line, at once."""
    data = names_into_one_table(300, 4 << 20)
    start = time.process_time()
    with pytest.raises(BadBinary, match="not terminated within 65536 bytes"):
        read_macho(data)
    assert time.process_time() - start < 10  # CPU time; about 0.01 s here


def test_names_at_the_tables_end_are_read_and_shared_names_once() -> None:
    """A last name whose NUL the table cut off is still that name; symbols sharing one name give it once."""
    data = names_into_one_table(300, 200)
    assert sorted(read_macho(data).imported) == sorted(
        {"_" * (198 - i % 7) for i in range(300)}
    )  # less the one Mach-O adds


@pytest.mark.parametrize(
    "machine",
    [("--preset", "mac"), ("--platform", "macosx_14_0_arm64"), ("--os", "macos", "--cpu", "arm64"),
     ("--platform", "macosx_11_0_arm64")],
)  # fmt: skip
def test_a_mac_takes_the_mac_wheels_packaging_says_it_does_whatever_the_spelling(
    run: Run, tmp_path: Path, machine: tuple[str, ...]
) -> None:
    """A macOS 14 arm64 machine accepts macosx_11_0_arm64 (packaging's mac_platforms((14, 0), "arm64"),
    as pip does): one machine, one verdict. ``--preset mac`` said "no platform tag this machine accepts"."""
    whl = make_wheel(tmp_path / "dist", "macvision", "0.24.0", "cp311-cp311-macosx_11_0_arm64",
                     {"macvision/__init__.py": b"", "macvision/_C.so": EXACT})  # fmt: skip
    result = run("doctor", str(whl), *machine, "--python", "3.11", "--torch", "2.9", "--json")
    verdicts = {v["demand"]: v for v in json.loads(result.out)["wheels"][0]["verdicts"]}
    assert verdicts["python"]["ok"] is True, verdicts["python"]
    assert verdicts["os"]["ok"] is True and verdicts["cpu"]["ok"] is True, verdicts
