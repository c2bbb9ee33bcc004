"""librarian.ops.machine.doctor: reports, their table, their JSON, and the machine summary."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from librarian.coords import GpuArch
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.machine import Gpu, Machine, Probed, TorchInfo
from librarian.ops.machine.doctor import (
    diagnose,
    doctor,
    doctor_json,
    machine_json,
    render_doctor,
    render_machine,
)
from tests.builders import make_wheel

NAME = "kern-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl"


def machine(sm: str = "89") -> Machine:
    base = Machine(cpu=Probed.found("x86_64", "test"), os=Probed.found("linux", "test"))
    return base.with_overrides(sm=sm, torch="2.8", cuda="12.8", python="3.12", glibc="2.35", driver="12.8")


def facts(*sass: str, glibc: tuple[int, int] = (2, 28)) -> WheelFacts:
    archs = tuple(GpuArch.parse(a) for a in sass)
    return WheelFacts(NAME, (BinaryFacts("kern/_C.so", BinaryFormat.ELF, "x86_64", sass=archs, glibc=glibc),))


def test_a_wheel_that_runs() -> None:
    report = diagnose(facts("sm_89"), machine())
    assert report.runs is True and report.failures == ()
    text = render_doctor(report)
    assert text.splitlines()[0] == f"{NAME}: runs here by its own sm_89 SASS"
    assert "GPU arch" in text and "at run time" not in text


def test_a_wheel_that_does_not_run_names_the_errors() -> None:
    report = diagnose(facts("sm_90a", glibc=(2, 39)), machine())
    assert report.runs is False
    assert [v.demand.value for v in report.failures] == ["gpu", "glibc"]
    text = render_doctor(report)
    assert "will NOT run here" in text
    assert "no kernel image is available for execution on the device" in text
    assert "version 'GLIBC_2.39' not found" in text
    gpu_row = next(line for line in text.splitlines() if line.lstrip().startswith("GPU arch"))
    assert "FAIL" in gpu_row and "sm_90a" in gpu_row and "sm_89" in gpu_row


def test_unknown_parts_make_a_maybe() -> None:
    report = diagnose(facts("sm_89"), Machine())
    assert report.runs is None
    assert "no GPU found; pass --sm" in render_doctor(report)


def test_json_has_schema_and_every_demand() -> None:
    data = doctor_json(diagnose(facts("sm_90"), machine()))
    json.dumps(data)  # plain JSON types only
    assert data["schema"] == 1 and data["runs"] is False and data["wheel"] == NAME
    assert [v["demand"] for v in data["verdicts"]] == ["gpu", "torch", "cuda", "python", "cpu", "os", "glibc"]
    assert data["verdicts"][0]["predicted_error"].endswith(
        "no kernel image is available for execution on the device"
    )
    assert data["machine"]["gpus"]["value"][0]["arch"] == "sm_89"


def test_render_machine_says_what_was_found_and_how() -> None:
    gpus = (Gpu(0, "NVIDIA GeForce RTX 4090", (8, 9), "GPU-aaaa"), Gpu(1, "NVIDIA H100", (9, 0)))
    torch = TorchInfo("2.8.0+cu128", (12, 8), True, Path("/site/torch/lib"))
    m = Machine(
        gpus=Probed.found(gpus, "NVML"),
        selected=1,
        torch=Probed.found(torch, "torch 2.8.0+cu128 metadata"),
        cuda=Probed.found((12, 8), "torch/version.py"),
    )
    text = render_machine(m)
    assert "GPU 0" in text and "NVIDIA H100 sm_90 (selected)" in text and "(NVML)" in text
    assert "2.8.0+cu128 (cxx11 ABI) in /site/torch/lib" in text
    assert "no GPU driver found; pass --driver" in text and "glibc not found; pass --glibc" in text
    data = machine_json(m)
    json.dumps(data)
    assert data["selected_gpu"] == 1 and data["driver_cuda"]["value"] is None
    assert data["torch"]["value"]["cxx11abi"] is True


def test_doctor_reads_a_real_wheel(tmp_path: Path) -> None:
    path = make_wheel(tmp_path, "purekern", "1.0+cu128torch2.8", "cp312-cp312-linux_x86_64")
    report = doctor(path, machine())
    assert report.facts.binaries == () and report.runs is True


def test_doctor_checks_torch_symbols_of_a_real_extension(tmp_path: Path) -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    (tmp_path / "c10.cpp").write_text("namespace c10 { int present() { return 1; } }\n")
    (tmp_path / "ext.cpp").write_text(
        "namespace c10 { int present(); int absent(); }\nint use() { return c10::present() + c10::absent(); }\n"
    )
    lib_dir = tmp_path / "torch" / "lib"
    lib_dir.mkdir(parents=True)
    cc = ["g++", "-shared", "-fPIC"]
    subprocess.run([*cc, str(tmp_path / "c10.cpp"), "-o", str(lib_dir / "libc10.so")], check=True)
    subprocess.run([*cc, str(tmp_path / "ext.cpp"), "-o", str(tmp_path / "ext.so")], check=True)
    so = (tmp_path / "ext.so").read_bytes()
    wheel = make_wheel(
        tmp_path / "dist", "ext", "1.0+cu128torch2.8", "cp312-cp312-linux_x86_64", {"ext/_C.so": so}
    )
    info = TorchInfo("2.8.0+cu128", (12, 8), True, lib_dir)
    m = Machine(torch=Probed.found(info, "test"), cuda=Probed.found((12, 8), "test"))
    report = doctor(wheel, m)
    torch = report.verdicts[1]
    assert torch.ok is False and torch.predicted_error == "undefined symbol: _ZN3c106absentEv"
