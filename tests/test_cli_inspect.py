"""``librarian inspect`` end to end, as a user runs it, on wheels built around the real nvcc fixtures."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from librarian.wheel.elf import read_elf
from librarian.wheel.members import inspect_path
from tests.builders import make_wheel
from tests.conftest import Result, Run
from tests.cuda_fixtures import fixtures_toolkit, pe_bytes, real_sos

EXEC = 0o755


@pytest.fixture(scope="session")
def cuda_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc-built fixtures (checked in; rebuilt once per session when asked)."""
    return real_sos(tmp_path_factory)


@pytest.fixture
def built_by() -> str:
    """``13.0``: the toolkit the fixtures were built with, as inspect prints it."""
    version = fixtures_toolkit()
    return f"{version[0]}.{version[1]}"


def wheel(
    directory: Path,
    members: dict[str, bytes],
    *,
    name: str = "tinykern",
    version: str = "1.0",
    tags: str = "cp312-cp312-linux_x86_64",
) -> Path:
    files = {f"{name}/__init__.py": b"", **members}
    return make_wheel(directory, name, version, tags, files, modes={m: EXEC for m in members})


def rows(out: str) -> dict[str, str]:
    """The demand table of one file: demand -> value (the lines before any per-member rows)."""
    table = {}
    for line in out.splitlines()[1:]:
        m = re.fullmatch(r"  (GPU arch|torch|CUDA|Python|CPU arch|OS|glibc) +(.*)", line)
        if m:
            table[m[1]] = m[2]
    return table


def one_line_error(result: Result, prefix: str) -> None:
    assert result.code == 2, result
    assert result.err.startswith(f"librarian: error: {prefix}"), result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    if result.out:  # only under --json: the same failure as the one JSON document on stdout
        line = result.err.removeprefix("librarian: error: ").rstrip("\n")
        assert json.loads(result.out) == {"schema": 1, "error": line, "exit": 2, "details": []}


def test_table_shows_the_seven_demands(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path], built_by: str
) -> None:
    whl = wheel(
        tmp_path / "d", {"tinykern/_C.so": cuda_sos["multi"].read_bytes()}, version="1.0+cu130torch2.9"
    )
    result = run("inspect", str(whl))
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == str(whl)
    table = rows(result.out)
    assert list(table) == ["GPU arch", "torch", "CUDA", "Python", "CPU arch", "OS", "glibc"]
    # sm_75 .. sm_89 SASS serve every real 7.5+ and 8.x GPU an x86_64 machine can have (8.7 is Jetson only)
    assert table["GPU arch"] == "sm_75, sm_80, sm_86, sm_89, compute_89; runs natively on sm75 sm80 sm86 sm89"
    assert table["torch"] == "does not link torch"
    assert table["CUDA"] == f"CUDA 13.0 (label), built by CUDA {built_by}, libcudart.so.13"
    assert table["Python"] == "cp312-cp312-linux_x86_64"
    assert table["CPU arch"] == "x86_64"
    assert table["OS"] == "linux (elf)"
    assert re.fullmatch(r"GLIBC_2\.\d+(\.\d+)?(, GLIBCXX_[\d.]+)?", table["glibc"]), table["glibc"]
    assert "!" not in result.out  # label, platform and bytes agree
    assert "tinykern/_C.so" not in result.out  # members only with -v


def test_arch_and_family_suffixes(run: Run, tmp_path: Path, cuda_sos: dict[str, Path]) -> None:
    whl = wheel(tmp_path / "d", {"tinykern/_S.so": cuda_sos["special"].read_bytes()})
    result = run("inspect", str(whl))
    assert result.code == 0, result.err
    table = rows(result.out)
    # sm_90a: the H100 alone; sm_100f: the 10.x family; sm_120f: 12.0 (12.1 ships only with an Arm CPU)
    assert (
        table["GPU arch"]
        == "sm_90a, sm_100f, sm_120f, compute_120f; runs natively on sm90 sm100 sm103 sm107 sm120"
    )
    assert table["torch"] == "does not link torch"


def test_verbose_shows_each_member(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path], built_by: str
) -> None:
    members = {
        "tinykern/_C.so": cuda_sos["multi"].read_bytes(),
        "tinykern/_S.so": cuda_sos["special"].read_bytes(),
    }
    whl = wheel(tmp_path / "d", members)
    result = run("inspect", "-v", str(whl))
    assert result.code == 0, result.err
    # _S.so has no code for 7.5 to 8.9: those are served partly, naming it; on 9.0 and newer, _C.so's
    # compute_89 PTX serves it by JIT, so nothing lacks them
    assert rows(result.out)["GPU arch"] == (
        "sm_75, sm_80, sm_86, sm_89, sm_90a, sm_100f, sm_120f, compute_89, compute_120f; "
        "runs natively on sm75 sm80 sm86 sm89 (partly: not tinykern/_S.so); sm90 sm100 sm103 sm107 sm120"
    )
    lines = result.out.splitlines()
    c, s = lines.index("  tinykern/_C.so: elf x86_64"), lines.index("  tinykern/_S.so: elf x86_64")
    assert lines[c + 1] == "    SASS sm_75 sm_80 sm_86 sm_89; PTX compute_89"
    assert lines[s + 1] == "    SASS sm_90a sm_100f sm_120f; PTX compute_120f"
    for start, end in ((c, s), (s, len(lines))):
        block = lines[start:end]
        assert f"    built by CUDA {built_by}" in block
        assert any(re.fullmatch(r"    needs GLIBC_2\.\d+(\.\d+)?", line) for line in block)
        assert any(line.startswith("    needs ") and "libcudart.so.13" in line for line in block)
    assert "  tinykern/_C.so: elf" not in run("inspect", str(whl)).out


def test_json_has_schema_and_facts(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path], built_by: str
) -> None:
    members = {
        "tinykern/_C.so": cuda_sos["multi"].read_bytes(),
        "tinykern/_rdc.so": cuda_sos["rdc"].read_bytes(),
    }
    whl = wheel(tmp_path / "d", members, version="1.0+cu130torch2.9")
    result = run("inspect", "--json", str(whl), str(cuda_sos["special"]))
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == 1
    first, bare = data["files"]
    assert first["file"] == str(whl) and first["mismatches"] == []
    assert list(first["demands"]) == [
        "CPU arch",
        "CUDA",
        "GPU arch",
        "OS",
        "Python",
        "glibc",
        "torch",
    ]  # sorted keys
    facts = first["facts"]
    assert (
        facts["archs"] == ["sm_75", "sm_80", "sm_86", "sm_89", "compute_89"] and facts["toolkit"] == built_by
    )
    # _rdc.so's loadable SASS is sm_80 alone: an sm75 GPU runs _C.so but not it
    # each cell with what serves it: the arch whose SASS runs there, its own or compatible
    assert first["gpus"] == [
        {"sm": "sm75", "partly": ["tinykern/_rdc.so"], "serving": "sm_75", "how": "exact"}
    ] + [{"sm": f"sm{n}", "partly": [], "serving": f"sm_{n}", "how": "exact"} for n in (80, 86, 89)]
    c, rdc = facts["binaries"]
    assert (c["path"], c["format"], c["cpu"]) == ("tinykern/_C.so", "elf", "x86_64")
    assert c["sass"] == ["sm_75", "sm_80", "sm_86", "sm_89"] and c["ptx"] == ["compute_89"]
    assert "libcudart.so.13" in c["needed"] and c["toolkit"] == built_by
    assert rdc["sass"] == ["sm_80"] and rdc["relocatable_sass"] == ["sm_80"]
    assert rdc["relocatable_ptx"] == ["compute_80"]
    assert bare["facts"]["binaries"][0]["sass"] == ["sm_90a", "sm_100f", "sm_120f"]
    assert bare["facts"]["binaries"][0]["ptx"] == ["compute_120f"]


def test_a_bare_so_is_accepted(run: Run, cuda_sos: dict[str, Path], built_by: str) -> None:
    result = run("inspect", str(cuda_sos["stripped"]))
    assert result.code == 0, result.err
    table = rows(result.out)
    assert table["GPU arch"] == "sm_75; runs natively on sm75"  # code=sm_75 embeds no PTX
    # static cudart: no libcudart.so.N, said in the words doctor uses for the same bytes
    assert table["CUDA"] == f"built by CUDA {built_by}, links no CUDA runtime (static)"
    assert (table["Python"], table["CPU arch"], table["OS"]) == ("-", "x86_64", "linux (elf)")


def test_windows_pyd_is_reported(run: Run, tmp_path: Path) -> None:
    whl = wheel(tmp_path / "d", {"tinykern/_C.pyd": pe_bytes()}, tags="cp312-cp312-win_amd64")
    result = run("inspect", "-v", str(whl))
    assert result.code == 0, result.err
    table = rows(result.out)
    assert table["OS"] == "windows (pe)" and table["CPU arch"] == "x86_64"
    assert table["GPU arch"] == "no GPU code" and table["glibc"] == "no glibc floor"
    assert "  tinykern/_C.pyd: pe x86_64" in result.out.splitlines() and "!" not in result.out
    i686 = wheel(tmp_path / "e", {"tinykern/_C.pyd": pe_bytes(0x14C)}, tags="cp312-cp312-win_amd64")
    assert "  ! platform win_amd64, but tinykern/_C.pyd is i686" in run("inspect", str(i686)).out.splitlines()


def test_filename_and_bytes_disagree(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path], built_by: str
) -> None:
    # the label claims CUDA 12.8; the bytes were built by nvcc 13 and link libcudart.so.13
    so = cuda_sos["multi"].read_bytes()
    labelled = wheel(tmp_path / "a", {"tinykern/_C.so": so}, version="1.0+cu128torch2.8")
    result = run("inspect", str(labelled))
    assert result.code == 0, result.err  # a finding to show, not bad input
    lines = result.out.splitlines()
    assert f"  ! label says CUDA 12.8, device code built by CUDA {built_by}" in lines
    assert "  ! label says CUDA 12.8, tinykern/_C.so links libcudart.so.13" in lines
    # a manylinux tag that promises an older glibc than the bytes need (static cudart needs a new one)
    floor = inspect_path(cuda_sos["sm75"]).glibc
    assert floor is not None
    if floor <= (2, 17):
        pytest.skip(f"this toolchain's sm75.so needs only GLIBC_{floor[0]}.{floor[1]}")
    tagged = wheel(
        tmp_path / "b",
        {"tinykern/_C.so": cuda_sos["sm75"].read_bytes()},
        tags="cp312-cp312-manylinux_2_17_x86_64",
    )
    data = json.loads(run("inspect", "--json", str(tagged)).out)
    assert data["files"][0]["mismatches"] == [
        f"platform manylinux_2_17_x86_64 promises glibc 2.17, but tinykern/_C.so needs GLIBC_{floor[0]}.{floor[1]}"
    ]
    # an ELF .so in a Windows wheel
    elf_in_win = wheel(tmp_path / "c", {"tinykern/_C.so": so}, tags="cp312-cp312-win_amd64")
    assert (
        "  ! platform win_amd64, but tinykern/_C.so is an ELF binary" in run("inspect", str(elf_in_win)).out
    )


def _lying_fat_size(so: bytes) -> bytes:
    data = bytearray(so)
    sec = read_elf(so).section(".nv_fatbin")
    assert sec is not None
    struct.pack_into("<Q", data, sec.offset + 8, 1 << 40)  # the first blob's fat_size
    return bytes(data)


def test_bad_input_is_one_line_exit_2(run: Run, tmp_path: Path, cuda_sos: dict[str, Path]) -> None:
    so = cuda_sos["multi"].read_bytes()
    good = wheel(tmp_path / "good", {"tinykern/_C.so": so})
    truncated = wheel(tmp_path / "t", {"tinykern/_C.so": so[: len(so) // 2]})
    result = run("inspect", str(good), str(truncated))  # the good one is not printed either
    one_line_error(result, f"{truncated.name}!tinykern/_C.so: truncated section header table")
    lying = wheel(tmp_path / "f", {"tinykern/_C.so": _lying_fat_size(so)})
    one_line_error(run("inspect", "-v", str(lying)), f"{lying.name}!tinykern/_C.so: .nv_fatbin: blob at 0x")
    assert "has fat_size 0x10000000000, past the section end" in run("inspect", str(lying)).err
    not_zip = tmp_path / "tinykern-1.0-cp312-cp312-linux_x86_64.whl"
    not_zip.write_bytes(b"PK\x03\x04 not really")
    one_line_error(run("inspect", "--json", str(not_zip)), f"{not_zip.name}: not a readable zip")
    text = tmp_path / "notes.so"
    text.write_text("not a binary\n")
    one_line_error(run("inspect", str(text)), "notes.so: not a wheel, nor an ELF, PE or Mach-O binary")
    one_line_error(
        run("inspect", str(tmp_path / "missing.whl")),
        f"{tmp_path / 'missing.whl'}: no such file or directory",
    )


def test_loose_device_code_members_show_their_archs(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path]
) -> None:
    # flashinfer-cubin's pattern: a pure-Python wheel whose kernels are loose .cubin files, plus a .ptx
    members = {
        "kern/kernels/gemm_sm90a.cubin": cuda_sos["sm90a.cubin"].read_bytes(),
        "kern/kernels/gemm.ptx": cuda_sos["sm120f.ptx"].read_bytes(),
    }
    whl = make_wheel(tmp_path / "d", "kern", "1.0", "py3-none-any", members)
    result = run("inspect", "-v", str(whl))
    assert result.code == 0, result.err
    table = rows(result.out)
    # the .ptx is for the 12.x family only: an H100 runs the cubin, not it
    assert table["GPU arch"] == (
        "sm_90a, compute_120f; runs natively on sm90 (partly: not kern/kernels/gemm.ptx)"
    )
    assert table["OS"] == "any OS" and "!" not in result.out  # device code claims no host platform
    lines = result.out.splitlines()
    at = lines.index("  kern/kernels/gemm_sm90a.cubin: device code (loaded by the driver)")
    assert lines[at + 1] == "    SASS sm_90a; PTX -"
