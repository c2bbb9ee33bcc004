"""The Python, CPU, OS and glibc demands, and judge() over all seven."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from librarian.coords import WheelName
from librarian.demands import Demand, Wheel, judge, python
from librarian.facts import BinaryFormat
from librarian.machine import Probed
from tests.demand_builders import NAME, machine, so, verdict_for, wheel

# --- Python, CPU, OS, glibc ---------------------------------------------------------------------------------

PYTHON_CASES = [
    ("cp312-cp312-linux_x86_64", "3.12", True, ""),
    ("cp312-cp312-manylinux_2_28_x86_64", "3.12", True, ""),
    ("cp39-abi3-manylinux_2_17_x86_64", "3.12", True, ""),
    ("cp312-cp312-linux_x86_64", "3.11", False, "not a supported wheel"),
    ("cp312-cp312-manylinux_2_39_x86_64", "3.12", False, "no platform tag"),
    ("cp312-cp312-linux_aarch64", "3.12", False, "no platform tag"),
]


@pytest.mark.parametrize(("tags", "python", "ok", "names"), PYTHON_CASES)
def test_python_tags(tags: str, python: str, ok: bool, names: str) -> None:
    name = f"kern-1.0+cu128torch2.8-{tags}.whl"
    v = verdict_for(Demand.PYTHON, wheel(name=name), machine(python=python), name)
    assert v.ok is ok, v
    assert names in v.reason + v.predicted_error


def test_python_tags_unknown() -> None:
    v = verdict_for(Demand.PYTHON, wheel(), replace(machine(), python_tags=Probed.unknown("pass --python")))
    assert v.ok is None


@pytest.mark.parametrize(
    ("wheel_cpu", "machine_cpu", "ok", "error"),
    [
        ("x86_64", "x86_64", True, ""),
        ("aarch64", "aarch64", True, ""),
        ("aarch64", "x86_64", False, "cannot open shared object file"),
        ("i686", "x86_64", False, "wrong ELF class: ELFCLASS32"),
    ],
)
def test_cpu(wheel_cpu: str, machine_cpu: str, ok: bool, error: str) -> None:
    v = verdict_for(Demand.CPU, wheel(so(cpu=wheel_cpu)), machine(cpu=machine_cpu))
    assert v.ok is ok and error in v.predicted_error


@pytest.mark.parametrize(
    ("fmt", "os", "ok", "error"),
    [
        (BinaryFormat.ELF, "linux", True, ""),
        (BinaryFormat.PE, "linux", False, "invalid ELF header"),
        (BinaryFormat.ELF, "win32", False, "not a valid Win32 application"),
        (BinaryFormat.MACHO, "darwin", True, ""),
    ],
)
def test_os(fmt: BinaryFormat, os: str, ok: bool, error: str) -> None:
    v = verdict_for(Demand.OS, wheel(so(format=fmt)), machine(os=os))
    assert v.ok is ok and error in v.predicted_error


def test_glibc_floor_names_the_missing_version() -> None:
    v = verdict_for(Demand.GLIBC, wheel(so(glibc=(2, 35))), machine(glibc="2.31"))
    assert v.ok is False
    assert "GLIBC_2.35" in v.wheel_needs and v.predicted_error == "version 'GLIBC_2.35' not found"
    assert verdict_for(Demand.GLIBC, wheel(so(glibc=(2, 35))), machine(glibc="2.35")).ok is True


def test_glibcxx_floor() -> None:
    facts = wheel(so(glibc=(2, 17), glibcxx=(3, 4, 32)))
    v = verdict_for(Demand.GLIBC, facts, machine(glibcxx=(3, 4, 30)))
    assert v.ok is False and "GLIBCXX_3.4.32" in v.predicted_error
    assert verdict_for(Demand.GLIBC, facts, machine(glibcxx=(3, 4, 33))).ok is True
    unchecked = verdict_for(Demand.GLIBC, facts, machine(glibcxx=None))
    assert unchecked.ok is True and "not checked" in unchecked.reason


def test_glibc_unknown_only_matters_when_needed() -> None:
    m = replace(machine(), glibc=Probed.unknown("no glibc here; pass --glibc"))
    assert verdict_for(Demand.GLIBC, wheel(so(glibc=(2, 28))), m).ok is None
    assert verdict_for(Demand.GLIBC, wheel(so()), m).ok is True


def test_judge_a_wheel_that_runs() -> None:
    facts = wheel(
        so(sass="sm_80 sm_89", ptx="compute_89", glibc=(2, 28), needed=("libc10.so", "libcudart.so.12"))
    )
    verdicts = judge(Wheel(WheelName.parse(NAME), facts), machine()).verdicts
    assert all(v.ok for v in verdicts), [str(v) for v in verdicts if not v.ok]


def test_requires_python_rules_out_an_interpreter_the_tags_allow() -> None:
    name = WheelName.parse("kern-1.0-py3-none-any.whl")
    need = python.needs(Wheel(name, None, SpecifierSet(">=3.13")))
    v = python.check(need, machine(python="3.11"))
    assert v.ok is False and v.wheel_needs == "Requires-Python >=3.13" and v.machine_has == "Python 3.11"
    assert "requires a different Python" in v.predicted_error
    assert python.check(need, machine(python="3.13")).ok is True


def test_one_cpu_vocabulary_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Windows-on-Arm .pyd's PE header says arm64, the machine says ARM64: both are read as aarch64, where
    # they are read, and the demand compares them as they are.
    import platform

    from librarian.probe import detect_machine
    from librarian.wheel import inspect_path
    from tests.cuda_fixtures import pe_bytes

    pyd = Path(tempfile.mkdtemp()) / "_C.pyd"
    pyd.write_bytes(pe_bytes(0xAA64))
    (member,) = inspect_path(pyd).binaries
    assert member.cpu == "aarch64"
    monkeypatch.delattr(os, "uname")  # as on Windows, where the CPU is platform.machine()'s to say
    monkeypatch.setattr(platform, "machine", lambda: "ARM64")
    probed = detect_machine(loader=lambda *_a, **_k: (_ for _ in ()).throw(OSError("no library")))
    assert probed.cpu.value == "aarch64"
    facts = wheel(replace(member, path="k/_C.pyd"), name="k-1.0-cp312-cp312-win_arm64.whl")
    m = replace(machine(os="win32"), cpu=probed.cpu)
    v = verdict_for(Demand.CPU, facts, m, "k-1.0-cp312-cp312-win_arm64.whl")
    assert v.ok is True and v.machine_has == "aarch64"


def test_loose_device_code_is_not_host_code() -> None:
    facts = wheel(so("k/kernels/gemm.cubin", cpu=None, format=BinaryFormat.CUDA, sass="sm_90"))
    assert verdict_for(Demand.CPU, facts, machine()).wheel_needs == "any CPU"
    assert verdict_for(Demand.OS, facts, machine(os="win32")).ok is True
