"""Machines described by flags: --platform and --preset (README: doctor), for doctor and pull alike."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from librarian.errors import BadInput
from librarian.presets import find_preset, parse_presets, presets
from tests.conftest import Run

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"
CP310 = SAMPLES / "tinykern-0.1.0-cp310-cp310-linux_x86_64.whl"


def failing(run: Run, wheel: Path, *flags: str) -> set[str]:
    report = json.loads(run("doctor", str(wheel), *flags, "--json").out)["wheels"][0]
    return {v["demand"] for v in report["verdicts"] if v["ok"] is False}


def test_the_presets_are_data_checked_on_load() -> None:
    assert {"jetson-orin", "gh200", "rtx4090-linux", "windows-rtx4090", "mac"} <= set(presets())
    assert find_preset("gh200").get("platform") == "manylinux_2_35_aarch64"
    with pytest.raises(BadInput, match="--preset moon: no such machine .known: gh200"):
        find_preset("moon")
    with pytest.raises(BadInput, match="x.toml: not a table of machine presets .preset 'a' sets colour"):
        parse_presets('[a]\nsm = "89"\ncolour = "green"\n', "x.toml")


@pytest.mark.parametrize(
    ("preset", "fails"),
    [
        ("rtx4090-linux", set()),  # the sample's own kind of machine
        ("jetson-orin", {"cpu", "python"}),  # an x86_64 wheel on an Arm board: its CPU, and no tag fits
        ("windows-rtx4090", {"os", "python"}),
        ("mac", {"cpu", "os", "python"}),  # and an Apple silicon CPU
    ],
)
def test_a_preset_describes_another_machine(run: Run, preset: str, fails: set[str]) -> None:
    flags = ("--preset", preset, "--torch", "2.9", "--cuda", "13.0", "--python", "3.10", "--driver", "13.0")
    assert failing(run, CP310, *flags) == fails


def test_flags_given_beside_a_preset_win(run: Run) -> None:
    report = json.loads(
        run(
            "doctor",
            str(CP310),
            "--preset",
            "gh200",
            "--sm",
            "89",
            "--platform",
            "linux_x86_64",
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
            "--driver",
            "13.0",
            "--python",
            "3.10",
            "--json",
        ).out
    )
    machine = {v["demand"]: v["machine_has"] for v in report["wheels"][0]["verdicts"]}
    assert machine["gpu"] == "sm_89" and machine["cpu"] == "x86_64"


def test_pull_takes_a_preset_too(run: Run) -> None:
    assert (
        run("publish", *map(str, sorted(SAMPLES.glob("*.whl"))), "--torch", "2.9", "--cuda", "13.0").code == 0
    )
    pulled = run(
        "pull",
        "tinykern",
        "--preset",
        "rtx4090-linux",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--driver",
        "13.0",
        "-o",
        "out",
    )
    assert (
        pulled.code == 0 and "tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp312" in pulled.out
    )
    orin = run(
        "pull",
        "tinykern",
        "--preset",
        "jetson-orin",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--driver",
        "13.0",
        "--json",
    )
    assert orin.code == 1 and all("cpu" in c["fails"] for c in json.loads(orin.out)["candidates"])


@pytest.mark.parametrize(
    ("os", "cpu", "tag"),
    [("linux", "aarch64", "manylinux_2_28_aarch64"), ("windows", "x86_64", "win_amd64"),
     ("macos", "arm64", "macosx_11_0_arm64"), ("Windows", "AMD64", "win_amd64")],
)  # fmt: skip
def test_cpu_and_os_name_the_platform_they_mean(os: str, cpu: str, tag: str) -> None:
    from librarian.platforms import platform_for

    assert platform_for(os, cpu) == tag


def test_cpu_and_os_on_the_command_line(run: Run) -> None:
    flags = ("--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--python", "3.10", "--driver", "13.0")
    assert failing(run, CP310, *flags, "--os", "linux", "--cpu", "x86_64", "--glibc", "2.35") == set()
    assert failing(run, CP310, *flags, "--os", "windows", "--cpu", "x86_64") == {"os", "python"}
    both = run("doctor", str(CP310), *flags, "--os", "linux", "--cpu", "x86_64", "--platform", "win_amd64")
    assert both.code == 2 and "--cpu/--os: not with --platform" in both.err
    half = run("doctor", str(CP310), *flags, "--os", "linux")
    assert half.code == 2 and "give both" in half.err


def test_a_glibc_below_what_the_platform_tag_promises_is_no_machine(run: Run) -> None:
    """Issue 45, item 4: ``--platform manylinux_2_28_x86_64 --glibc 2.27`` was judged as if it could exist."""
    for argv in (("doctor", "--machine"), ("pull", "tinykern", "--torch", "2.9")):
        result = run(*argv, "--sm", "89", "--platform", "manylinux_2_28_x86_64", "--glibc", "2.27")
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert "no such machine: --platform manylinux_2_28_x86_64 promises glibc 2.28 or newer" in result.err
    fine = run("doctor", "--machine", "--sm", "89", "--platform", "manylinux_2_28_x86_64", "--glibc", "2.31")
    assert fine.code == 0, fine.err


def test_a_refusal_a_presets_driver_causes_names_driver(run: Run) -> None:
    """Issue 45, item 7: jetson-orin's preset driver is CUDA 12.6, so every CUDA 13 wheel failed on it with
    no hint that --driver overrides the preset; and a CUDA 13 torch beside it is no machine at all."""
    wheel = str(next((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*cp311*.whl")))
    preset = run("doctor", wheel, "--preset", "jetson-orin", "--torch", "2.9", "--json")
    (cuda,) = [v for v in json.loads(preset.out)["wheels"][0]["verdicts"] if v["demand"] == "cuda"]
    assert (
        cuda["ok"] is False
        and "(--preset jetson-orin's driver; --driver 13.0 overrides it)" in cuda["reason"]
    )
    own = run("doctor", wheel, "--preset", "jetson-orin", "--torch", "2.9", "--driver", "12.6", "--json")
    (cuda,) = [v for v in json.loads(own.out)["wheels"][0]["verdicts"] if v["demand"] == "cuda"]
    assert cuda["ok"] is False and "overrides it" not in cuda["reason"]  # the user's own word: no hint
    impossible = run("doctor", wheel, "--preset", "jetson-orin", "--torch", "2.9", "--cuda", "13.0")
    assert impossible.code == 2 and impossible.err.count("\n") == 1
    assert (
        "no such machine: a torch built for CUDA 13.0 needs a CUDA 13 driver, and --preset jetson-orin's driver, "
        "CUDA 12.6 is older; pass --driver 13.0 or newer, or --cuda 12.x" in impossible.err
    )
    flagged = run("doctor", wheel, "--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--driver", "12.8")
    assert flagged.code == 2 and "--driver 12.8 is older" in flagged.err


def test_one_word_per_os_for_the_wheel_and_the_machine(run: Run) -> None:
    """Issue 46 item 4: the OS row said ``linux (elf)`` of the wheel and ``win32 (pe)`` of the machine."""
    wheel = str(next((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*cp311*.whl")))
    result = run("doctor", wheel, "--preset", "windows-rtx4090", "--torch", "2.9", "--cuda", "12.8", "--json")
    (os_row,) = [v for v in json.loads(result.out)["wheels"][0]["verdicts"] if v["demand"] == "os"]
    assert os_row["wheel_needs"] == "linux (elf)" and os_row["machine_has"] == "windows (pe)", os_row


def test_the_torch_row_says_its_symbol_once_and_short(run: Run, tmp_path: Path) -> None:
    """Issue 46 item 4: the torch row repeated a 140-character mangled symbol in what the wheel needs, what
    the machine has and why, past 250 characters; the symbol is said once, cut to 60, the full one in the
    predicted error."""
    from tests.builders import make_wheel
    from tests.cuda_fixtures import elf_bytes

    long = "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    so = elf_bytes(needed=("libc10.so",), symbols={long: False})
    wheel = make_wheel(
        tmp_path / "w", "ext", "1.0+cu128torch2.8", "cp311-cp311-linux_x86_64", {"ext/_C.so": so}
    )
    result = run("doctor", str(wheel), "--sm", "89", "--torch", "2.9", "--python", "3.11", "--platform",
                 "linux_x86_64", "-v")  # fmt: skip  # -v: the table's cells whole
    row = next(line for line in result.out.splitlines() if line.strip().startswith("torch "))
    assert f"undefined symbol: {long}" in result.out  # the whole symbol where the loader would say it
    assert len(row) < 200, row
    if shutil.which("c++filt"):  # binutils' demangler: the C++ name, its parameters folded, once
        assert row.count("c10::detail::torchCheckFail(…)") == 1 and "_ZN3c10" not in row, row
    else:
        assert row.count("_ZN3c10") == 1, row


def test_without_a_demangler_the_symbol_is_said_mangled_and_cut(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.builders import make_wheel
    from tests.cuda_fixtures import elf_bytes

    long = "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    so = elf_bytes(needed=("libc10.so",), symbols={long: False})
    wheel = make_wheel(
        tmp_path / "w", "ext", "1.0+cu128torch2.8", "cp311-cp311-linux_x86_64", {"ext/_C.so": so}
    )
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    result = run("doctor", str(wheel), "--sm", "89", "--torch", "2.9", "--python", "3.11", "--platform",
                 "linux_x86_64", "-v")  # fmt: skip  # -v: the table's cells whole
    row = next(line for line in result.out.splitlines() if line.strip().startswith("torch "))
    assert row.count("_ZN3c10") == 1 and f"({len(long) - 59} more characters)" in row, row


def test_doctor_rows_fit_120_columns_and_minus_v_shows_them_whole(run: Run, tmp_path: Path) -> None:
    """Issue 53, item 6: the torch row listed every libtorch library (230-250 columns); at default verbosity
    each row fits 120 columns, a cut reason is said whole below the table, and -v shows every cell whole."""
    from tests.builders import make_wheel
    from tests.cuda_fixtures import elf_bytes

    libs = (
        "libc10.so",
        "libc10_cuda.so",
        "libtorch.so",
        "libtorch_cpu.so",
        "libtorch_cuda.so",
        "libtorch_python.so",
    )
    so = elf_bytes(needed=libs, symbols={"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs": False})
    wheel = make_wheel(
        tmp_path / "w", "ext", "1.0+cu128torch2.8", "cp311-cp311-linux_x86_64", {"ext/_C.so": so}
    )
    flags = ("--sm", "89", "--torch", "2.9", "--python", "3.11", "--platform", "linux-x86_64")
    short = run("doctor", str(wheel), *flags)
    assert max(len(line) for line in short.out.splitlines()) <= 120, short.out
    assert "  torch: built against torch 2.8, here 2.9" in short.out  # the failing reason, whole
    whole = run("doctor", str(wheel), *flags, "-v")
    assert "libtorch_python.so" in whole.out and max(len(line) for line in whole.out.splitlines()) > 120
