"""``librarian doctor`` end to end, as a user runs it, on wheels around real nvcc-built ``.so`` files.

The machine is this one (glibc, CPU, interpreter) with the GPU and torch probes fenced off
(:func:`tests.gpu_wheels.isolate_machine`): no GPU unless a fake ``nvidia-smi`` lists some.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, Run
from tests.cuda_fixtures import elf_bytes
from tests.gpu_wheels import TWO_GPUS, gpu_sos, isolate_machine, so_wheel

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples/dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl"
# The wheels' own tags pass, whatever interpreter runs the tests.
HERE = ("--python", "3.11", "--platform", "linux_x86_64")
DEMANDS = ["gpu", "torch", "cuda", "python", "cpu", "os", "glibc"]
NO_KERNEL = "no kernel image is available for execution on the device"


@pytest.fixture(scope="session")
def sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gpu_sos(tmp_path_factory)


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine without a GPU or torch."""
    isolate_machine(monkeypatch, tmp_path / "bin")


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine with an RTX 4090 (sm_89) and an H100 (sm_90), as a fake nvidia-smi lists them."""
    isolate_machine(monkeypatch, tmp_path / "bin", TWO_GPUS)


def one_line_error(result: Result, *needles: str) -> None:
    assert result.code == 2, result
    assert result.err.startswith("librarian: error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err, result.err


def verdicts(result: Result) -> dict[str, dict[str, Any]]:
    """The one wheel's verdicts from ``doctor --json``, by demand."""
    data = json.loads(result.out)
    (wheel,) = data["wheels"]
    return {v["demand"]: v for v in wheel["verdicts"]}


def gpu_row(out: str) -> str:
    return next(line for line in out.splitlines() if line.lstrip().startswith("GPU arch"))


@pytest.mark.usefixtures("bare")
def test_no_gpu_asks_for_sm_and_the_sample_runs_with_it(run: Run) -> None:
    if not SAMPLE.is_file():
        pytest.skip(f"{SAMPLE} is not built (samples/build.py)")
    unknown = run("doctor", str(SAMPLE), *HERE)
    assert unknown.code == 0, unknown
    assert unknown.out.splitlines()[0].endswith("may run here (some parts unknown)")
    assert "no GPU found; pass --sm" in gpu_row(unknown.out)
    gpu = verdicts(run("doctor", str(SAMPLE), *HERE, "--json"))["gpu"]
    assert gpu["ok"] is None and gpu["reason"] == "no GPU found; pass --sm"
    told = run("doctor", str(SAMPLE), *HERE, "--sm", "89", "--driver", "13.0")
    assert told.code == 0, told
    # No torch in it: the driver alone decides its CUDA demand, so every demand is known and passes.
    assert told.out.splitlines()[0] == f"{SAMPLE.name}: runs here by its own sm_89 SASS"
    assert "runs sm_89 SASS" in gpu_row(told.out)


@pytest.mark.usefixtures("bare")
def test_gpu_rules_on_real_sass(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    sm86 = so_wheel(tmp_path / "a", sos["sm_86"])
    ok = run("doctor", str(sm86), *HERE, "--sm", "89")
    assert ok.code == 0, ok
    assert "ok" in gpu_row(ok.out) and "runs sm_86 SASS" in gpu_row(ok.out)
    sm90 = so_wheel(tmp_path / "b", sos["sm_90"])
    no = run("doctor", str(sm90), *HERE, "--sm", "89")
    assert no.code == 1, no
    assert "will NOT run here" in no.out and "kern/_C.so has no code for sm_89" in gpu_row(no.out)
    assert f"GPU arch: at run time: CUDA error: {NO_KERNEL}" in no.out
    sm90a = so_wheel(tmp_path / "c", sos["sm_90a"])
    assert run("doctor", str(sm90a), *HERE, "--sm", "90").code == 0  # arch-specific: exactly 9.0 ...
    newer = run("doctor", str(sm90a), *HERE, "--sm", "100")  # ... and nothing newer
    assert newer.code == 1 and NO_KERNEL in newer.out and "sm_90a" in gpu_row(newer.out)


@pytest.mark.usefixtures("bare")
def test_ptx_needs_a_driver_that_knows_its_isa(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    ptx = so_wheel(tmp_path / "p", sos["ptx"])  # compute_80 PTX from nvcc 13.0, libcudart.so.13
    new = run("doctor", str(ptx), *HERE, "--sm", "89", "--driver", "13.0")
    assert new.code == 0, new
    assert "JIT-compiles compute_80" in gpu_row(new.out)
    unchecked = run("doctor", str(ptx), *HERE, "--sm", "89")
    assert (
        unchecked.code == 0
        and "GPU arch: JIT-compiles compute_80 (driver not checked; pass --driver)"
        in (
            unchecked.out  # a reason the table's width cuts is said whole below it
        )
    )
    old = run("doctor", str(ptx), *HERE, "--sm", "89", "--driver", "12.4", "--json")
    assert old.code == 1, old
    got = verdicts(old)
    assert got["gpu"]["ok"] is False
    assert "needs a driver for CUDA 13.0+, the driver is for CUDA 12.4" in got["gpu"]["reason"]
    assert (
        got["gpu"]["predicted_error"]
        == "CUDA error: the provided PTX was compiled with an unsupported toolchain"
    )
    # libcudart.so.13 cannot start on a CUDA 12 driver either.
    assert got["cuda"]["ok"] is False
    assert got["cuda"]["predicted_error"] == "CUDA driver version is insufficient for CUDA runtime version"


@pytest.mark.usefixtures("bare")
def test_glibc_floor(run: Run, tmp_path: Path) -> None:
    so = elf_bytes(needed=("libc.so.6",), verneed={"libc.so.6": ("GLIBC_2.17", "GLIBC_2.35")})
    wheel = so_wheel(tmp_path / "g", so)
    old = run("doctor", str(wheel), *HERE, "--glibc", "2.31")
    assert old.code == 1, old
    row = next(line for line in old.out.splitlines() if line.lstrip().startswith("glibc "))
    assert "FAIL" in row and "GLIBC_2.35" in row and "GLIBC_2.31" in row
    assert "glibc: at run time: version 'GLIBC_2.35' not found" in old.out
    assert run("doctor", str(wheel), *HERE, "--glibc", "2.35").code == 0


@pytest.mark.usefixtures("bare")
def test_json_is_one_document_with_one_verdict_per_demand(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    wheels = [str(so_wheel(tmp_path / "j", sos["multi"])), str(so_wheel(tmp_path / "k", sos["sm_90"]))]
    result = run("doctor", *wheels, *HERE, "--sm", "89", "--json")
    assert result.code == 1  # the second does not run on sm_89
    data = json.loads(result.out)
    assert data["schema"] == 1 and "machine" not in data
    assert [w["runs"] for w in data["wheels"]] == [None, False]  # the first: CUDA unknown (no --driver)
    for wheel in data["wheels"]:
        assert [v["demand"] for v in wheel["verdicts"]] == DEMANDS
        assert all(
            set(v)
            == {
                "demand",
                "ok",
                "wheel_needs",
                "machine_has",
                "reason",
                "predicted_error",
                "partly",
                "not_loaded",
                "exact",
            }
            for v in wheel["verdicts"]
        )
    both = json.loads(run("doctor", wheels[0], *HERE, "--sm", "89", "--machine", "--json").out)
    assert both["schema"] == 1 and both["machine"]["gpus"]["source"] == "--sm" and len(both["wheels"]) == 1


@pytest.mark.usefixtures("bare")
def test_machine_says_what_was_found_and_how(run: Run) -> None:
    result = run("doctor", "--machine")
    assert result.code == 0, result
    rows = {line.strip().split("  ")[0]: line for line in result.out.splitlines()}
    assert "no GPU found; pass --sm" in rows["GPU"] and "unknown" in rows["GPU"]
    assert "no GPU driver found; pass --driver" in rows["driver"]
    assert "torch is not installed; pass --torch" in rows["torch"]
    assert "(confstr)" in rows["glibc"] and "(platform.machine())" in rows["CPU"]
    told = run("doctor", "--machine", "--sm", "89", "--glibc", "2.31")
    assert "--sm 89 sm_89 (selected)" in told.out and "(--sm)" in told.out
    assert "2.31" in told.out and "(--glibc)" in told.out
    data = json.loads(run("doctor", "--json").out)
    assert data["schema"] == 1 and data["machine"]["gpus"]["reason"] == "no GPU found; pass --sm"


@pytest.mark.usefixtures("two_gpus")
def test_two_gpus_judge_0_unless_told(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    wheel = str(so_wheel(tmp_path / "w", sos["sm_90"]))
    first = run("doctor", wheel, *HERE, "--json")
    assert first.code == 1
    assert verdicts(first)["gpu"]["machine_has"] == "sm_89"
    assert json.loads(first.out)["wheels"][0]["machine"]["driver_cuda"]["value"] == "13.0"
    second = run("doctor", wheel, *HERE, "--gpu", "1")
    assert second.code == 0, second
    assert "runs sm_90 SASS" in gpu_row(second.out)
    shown = {
        line.strip().split("  ")[0]: line
        for line in run("doctor", "--machine", "--gpu", "1").out.splitlines()
    }
    assert "NVIDIA GeForce RTX 4090 sm_89 GPU-aaaa" in shown["GPU 0"] and "(nvidia-smi)" in shown["GPU 0"]
    assert "NVIDIA H100 80GB HBM3 sm_90 (selected) GPU-bbbb" in shown["GPU 1"]
    assert "CUDA 13.0" in shown["driver"] and "(nvidia-smi)" in shown["driver"]
    one_line_error(run("doctor", wheel, "--gpu", "7"), "--gpu 7: no such GPU (found 2)")


@pytest.mark.usefixtures("two_gpus")
@pytest.mark.parametrize(
    ("visible", "judged", "count"),
    [("1", "sm_90", 1), ("GPU-aaaa", "sm_89", 1), ("1,0", "sm_90", 2), ("0,7,1", "sm_89", 1)],
)
def test_cuda_visible_devices_picks_gpu_0(
    run: Run,
    sos: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    visible: str,
    judged: str,
    count: int,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    wheel = str(so_wheel(tmp_path / "w", sos["sm_90"]))
    result = run("doctor", wheel, *HERE, "--machine", "--json")
    assert result.code == (0 if judged == "sm_90" else 1), result
    data = json.loads(result.out)
    gpus = data["machine"]["gpus"]
    assert [g["index"] for g in gpus["value"]] == list(range(count))  # CUDA numbers the visible ones from 0
    assert gpus["source"] == f"nvidia-smi, CUDA_VISIBLE_DEVICES={visible}"
    assert data["wheels"][0]["verdicts"][0]["machine_has"] == judged


@pytest.mark.usefixtures("two_gpus")
def test_cuda_visible_devices_can_hide_every_gpu(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = run("doctor", "--machine")
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU; pass --sm" in result.out


@pytest.mark.usefixtures("bare")
def test_bad_input_is_one_line_without_librarian_debug(run: Run, tmp_path: Path) -> None:
    missing = run("doctor", "nothere.whl", "--machine")
    one_line_error(missing, "nothere.whl: no such file or directory")
    assert missing.out == ""  # checked before anything is printed
    (tmp_path / "junk-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    one_line_error(
        run("doctor", "junk-1.0-py3-none-any.whl"), "junk-1.0-py3-none-any.whl", "not a readable zip"
    )
    one_line_error(run("doctor", "--machine", "--sm", "banana"), "banana: not a GPU arch")
    one_line_error(run("doctor", "--machine", "--driver", "new"), "new: not a CUDA version")
