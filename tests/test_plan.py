"""`librarian plan`, the toolkit ranges behind it, and the matrix's arch lists, as a user runs them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from librarian.config import load_layout
from librarian.coords import Cell as StoreCell
from librarian.coords import GpuArch, Label
from librarian.errors import BadInput
from librarian.gpus import compiled_by, find_gpu, known_gpus
from librarian.index import Index, IndexEntry
from librarian.ops.grid.plan import Spec, make_plan
from librarian.pytorch.matrix import Matrix, Platform, Selection, load_matrix
from librarian.pytorch.matrix_render import GITHUB_MAX_JOBS, github_matrices, github_matrix
from tests.conftest import Run

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"


@pytest.fixture(autouse=True)
def own_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "config" / "matrix.toml"
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(path))
    return path


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(Path("/nonexistent/override.toml"))


# --- which CUDA compiles which GPU: data ------------------------------------------------------------


@pytest.mark.parametrize(
    ("sm", "cuda", "compiles"),
    [
        ("3.5", "11.8", True), ("3.7", "12.0", False),  # 12.0 dropped sm_35/sm_37
        ("5.0", "12.9", True), ("7.2", "13.0", False), ("7.5", "13.0", True),  # 13.0 dropped sm_50 to sm_72
        ("10.0", "12.6", False), ("10.0", "12.8", True), ("12.0", "12.8", True),  # 12.8 added sm_100/sm_120
        ("10.3", "12.8", False), ("10.3", "12.9", True), ("12.1", "12.9", True),  # 12.9 added sm_103/sm_121
        ("11.0", "12.9", False), ("11.0", "13.0", True),  # Thor: sm_110 from 13.0 (sm_101 before)
        ("8.9", "11.8", True), ("9.0", "11.7", False),
    ],
)  # fmt: skip
def test_toolkit_ranges_are_data(sm: str, cuda: str, compiles: bool) -> None:
    gpu = find_gpu(GpuArch.parse(sm).capability)
    assert gpu is not None
    major, minor = map(int, cuda.split("."))
    assert gpu.compiled_by((major, minor)) is compiles


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: the toolkit oracle needs it")
def test_toolkit_ranges_agree_with_the_installed_nvcc() -> None:
    version = re.search(
        r"release (\d+)\.(\d+)",
        subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout,
    )
    assert version is not None
    cuda = (int(version[1]), int(version[2]))
    listed = subprocess.run(
        ["nvcc", "--list-gpu-code"], capture_output=True, text=True, check=True
    ).stdout.split()
    real = {g.arch.sm for g in known_gpus()}
    by_nvcc = {code.removeprefix("sm_") for code in listed if code.removeprefix("sm_") in real}
    assert {g.arch.sm for g in compiled_by(cuda)} == by_nvcc


def test_judgement_says_when_no_build_of_the_line_can_serve_the_gpu(run: Run) -> None:
    # The sample kernel is a CUDA 13.0 build; sm_61 (Pascal) is beyond every CUDA 13 nvcc.
    wheel = SAMPLES / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
    result = run(
        "doctor", str(wheel), "--sm", "61", "--torch", "2.9", "--cuda", "13.0", "--python", "3.12", "--json"
    )
    assert result.code == 1
    gpu = next(v for v in json.loads(result.out)["wheels"][0]["verdicts"] if v["demand"] == "gpu")
    assert "no CUDA 13.0 build can serve it (CUDA 8.0 to 12.9 targets sm_61)" in gpu["reason"]


# --- the matrix: an arch list for every combo, and Actions' job limit -------------------------------


def test_every_arch_list_in_the_data_is_one_its_cuda_line_can_compile(matrix: Matrix) -> None:
    for row in matrix.doc.arch:
        for arch in row.sass:
            gpu = find_gpu(arch.capability)
            assert gpu is not None and gpu.compiled_by(row.cuda), (row.source, arch)


def test_every_combo_has_an_arch_list_per_platform(matrix: Matrix) -> None:
    for combo in matrix.all_combos:
        row = matrix.build_arch_list(combo.cuda, combo.platform, combo.torch)
        assert row.arch_list, combo
        for arch in row.sass:
            gpu = find_gpu(arch.capability)
            assert gpu is not None and gpu.compiled_by(combo.cuda)
            assert gpu.ships_with(frozenset({combo.platform.cpu})), (combo, arch)


def test_derived_arch_lists_follow_the_platform(matrix: Matrix) -> None:
    arm = matrix.build_arch_list((12, 8), Platform.LINUX_AARCH64)
    x86 = matrix.build_arch_list((11, 8), Platform.LINUX_X86_64)
    assert "derived" in arm.source and "8.7" in arm.arch_list.split(";")  # Jetson Orin ships with Arm
    assert "8.7" not in x86.arch_list.split(";") and "3.7" in x86.arch_list.split(";")
    assert "12.0" not in x86.arch_list.split(";")  # CUDA 11.8 cannot target Blackwell


def test_github_matrix_past_256_jobs_is_refused_or_split(matrix: Matrix) -> None:
    sel = Selection()
    total = len(matrix.select(sel))
    assert total > GITHUB_MAX_JOBS
    with pytest.raises(BadInput, match=f"{total} jobs: past GitHub Actions' limit of 256"):
        github_matrix(matrix, sel)
    doc = json.loads(json.dumps(github_matrix(matrix, sel, split=True)))
    parts = doc["matrices"]
    assert all(0 < len(p["include"]) <= GITHUB_MAX_JOBS for p in parts)
    jobs = [j for p in parts for j in p["include"]]
    assert len(jobs) == total and all(j["TORCH_CUDA_ARCH_LIST"] for j in jobs)
    assert github_matrices([{"a": 1}]) == {"include": [{"a": 1}]}


def test_matrix_github_has_no_empty_arch_list(run: Run) -> None:
    result = run("matrix", "--github", "--split")
    assert result.code == 0
    jobs = [j for p in json.loads(result.out)["matrices"] for j in p["include"]]
    assert jobs and all(j["TORCH_CUDA_ARCH_LIST"] for j in jobs)
    refused = run("matrix", "--github")
    assert refused.code == 2 and "--split" in refused.err and refused.err.count("\n") == 1


# --- publish: torch lines newer than the matrix, or known only in part ------------------------------


def test_publish_torch_2_15_cuda_13_0_of_the_samples_works(run: Run, tmp_path: Path) -> None:
    result = run("publish", *map(str, sorted(SAMPLES.glob("*.whl"))), "--torch", "2.15", "--cuda", "13.0")
    assert result.code == 0, result.err
    assert len(list((tmp_path / "wheelhouse" / "tinykern").rglob("*+cu130torch2.15-*.whl"))) == 12
    warnings = [line for line in result.err.splitlines() if "matrix refresh" in line]
    assert len(warnings) == 1  # one warning, not one per wheel


def test_a_torch_line_newer_than_the_matrix_is_taken_with_one_warning(run: Run, matrix: Matrix) -> None:
    newest = matrix.torch_versions()[0]
    newer = f"{newest[0]}.{newest[1] + 1}"
    result = run("publish", *map(str, sorted(SAMPLES.glob("*.whl"))), "--torch", newer, "--cuda", "13.0")
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if "matrix refresh" in line]
    assert len(warnings) == 1 and f"torch {newer} is newer than every line" in warnings[0]


def test_a_known_torch_line_with_an_unknown_cuda_line_is_still_refused(run: Run, matrix: Matrix) -> None:
    known = next(t.version for t in matrix.doc.torch if not t.partial)
    torch = f"{known[0]}.{known[1]}"
    result = run(
        "publish",
        str(SAMPLES / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"),
        "--torch",
        torch,
        "--cuda",
        "13.9",
    )
    assert result.code == 2 and f"PyTorch never shipped cu139torch{torch}" in result.err


# --- plan -------------------------------------------------------------------------------------------


def test_spec_parsing() -> None:
    spec = Spec.parse("Flash_Attn==2.8.3")
    assert (spec.package, str(spec.version), spec.text) == ("flash_attn", "2.8.3", "flash-attn==2.8.3")
    for bad in ("flash-attn", "flash-attn>=2.8", "==2.8", "flash-attn==two", "flash-attn==2.8+cu128torch2.9"):
        with pytest.raises(BadInput, match=re.escape(bad)):
            Spec.parse(bad)


def test_plan_lists_exactly_the_cells_the_store_lacks(run: Run, tmp_path: Path) -> None:
    assert (
        run("publish", *map(str, sorted(SAMPLES.glob("*.whl"))), "--torch", "2.9", "--cuda", "13.0").code == 0
    )
    result = run(
        "plan",
        "tinykern==0.1.0",
        "--sm",
        "80",
        "--sm",
        "89",
        "--sm",
        "120",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--python",
        "3.12",
        "--python",
        "3.13",
        "--json",
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    held = {(h["python"], h["sm"]) for h in data["held"]}
    assert held == {("cp312", "80"), ("cp312", "89")}  # the sample has sm_80..sm_90 SASS for cp310-cp312
    jobs = {(j["python-tag"], j["TORCH_CUDA_ARCH_LIST"]) for j in data["jobs"]}
    assert jobs == {("cp312", "12.0"), ("cp313", "8.0;8.9;12.0")}
    job = next(j for j in data["jobs"] if j["python-tag"] == "cp313")
    assert job["cells"] == ["sm80", "sm89", "sm120"] and job["spec"] == "tinykern==0.1.0"
    assert job["torch-install"] == "torch==2.9.* --index-url https://download.pytorch.org/whl/cu130"
    assert job["container"] == "pytorch/manylinux2_28-builder:cuda13.0" and job["label"] == "cu130torch2.9"
    # The text form says the same.
    text = run(
        "plan",
        "tinykern==0.1.0",
        "--sm",
        "80",
        "--sm",
        "89",
        "--sm",
        "120",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--python",
        "3.12",
        "--python",
        "3.13",
    ).out
    assert text.splitlines()[0] == "tinykern 0.1.0: 2 cell(s) held, 4 missing in 2 job(s)"


def test_a_wheel_that_serves_another_line_by_its_bytes_holds_it(run: Run) -> None:
    # The sample kernel links no torch: its cu130torch2.9 build serves torch 2.10's CUDA 13.0 line as it is.
    assert (
        run(
            "publish",
            str(SAMPLES / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"),
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
        ).code
        == 0
    )
    data = json.loads(
        run(
            "plan",
            "tinykern==0.1.0",
            "--sm",
            "89",
            "--torch",
            "2.10",
            "--cuda",
            "13.0",
            "--python",
            "3.12",
            "--json",
        ).out
    )
    assert data["jobs"] == []
    assert [h["note"] for h in data["held"]] == ["built for cu130torch2.9, filed under sm89"]


def test_wheels_bound_to_their_torch_line_hold_only_it() -> None:
    layout = load_layout()
    entries = []
    for label in ("cu128torch2.8", "cu128torch2.9"):
        cell = StoreCell("pkg", GpuArch.parse("sm_89"), Label.parse(label))
        name = f"pkg-1.0+{label}-cp312-cp312-linux_x86_64.whl"
        entries.append(
            IndexEntry(layout.path_for(cell, name), "0" * 64, 1, cell)
        )  # no facts: bound to its line
    index = Index(layout, tuple(entries))
    matrix = load_matrix(Path("/nonexistent/override.toml"))
    sel = Selection.parse(
        torch=["2.8", "2.9", "2.10"], cuda=["12.8"], python=["3.12"], platform=["linux-x86_64"]
    )
    result = make_plan(index, matrix, sel, [Spec.parse("pkg==1.0")], [GpuArch.parse("sm_89")], location="mem")
    assert {h.cell.combo.torch for h in result.held} == {(2, 8), (2, 9)}
    assert [(j.combo.torch, j.arch_list) for j in result.jobs] == [((2, 10), "8.9")]
    # Another version of the package holds nothing of this one.
    other = make_plan(index, matrix, sel, [Spec.parse("pkg==1.1")], [GpuArch.parse("sm_89")], location="mem")
    assert len(other.jobs) == 3 and not other.held


def test_plan_names_what_no_build_can_fill_and_skips_gpus_of_other_cpus(run: Run) -> None:
    data = json.loads(
        run(
            "plan",
            "tinykern==0.1.0",
            "--sm",
            "87",
            "--sm",
            "120",
            "--torch",
            "2.9",
            "--cuda",
            "12.6",
            "--python",
            "3.12",
            "--json",
        ).out
    )
    assert data["jobs"] == []  # sm87 (Jetson Orin) is no x86_64 cell; CUDA 12.6 cannot target sm120
    assert [(u["sm"], u["reason"]) for u in data["unbuildable"]] == [
        ("120", "CUDA 12.6 cannot target sm_120 (CUDA 12.8 or newer can)")
    ]
    arm = json.loads(
        run(
            "plan",
            "tinykern==0.1.0",
            "--sm",
            "87",
            "--torch",
            "2.9",
            "--cuda",
            "12.6",
            "--python",
            "3.12",
            "--platform",
            "linux-aarch64",
            "--ptx",
            "--json",
        ).out
    )
    assert [(j["TORCH_CUDA_ARCH_LIST"], j["container"]) for j in arm["jobs"]] == [
        ("8.7+PTX", "pytorch/manylinuxaarch64-builder:cuda12.6")
    ]


def test_plan_sm_from_store_and_github_output(run: Run) -> None:
    assert (
        run(
            "publish",
            str(SAMPLES / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"),
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
        ).code
        == 0
    )
    result = run(
        "plan",
        "other==2.0",
        "--sm-from",
        "store",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--python",
        "3.12",
        "--github",
    )
    assert result.code == 0, result.err
    include = json.loads(result.out)["include"]
    assert len(include) == 1 and include[0]["TORCH_CUDA_ARCH_LIST"] == "8.0;8.6;8.9;9.0"  # the samples' cells
    assert include[0]["runs-on"] == "ubuntu-22.04" and include[0]["package"] == "other"
    # Free-threaded Pythons only when named; the default platform is Linux x86_64.
    every = json.loads(run("plan", "other==2.0", "--sm", "90", "--torch", "2.10", "--github").out)["include"]
    assert every and not any(j["python-tag"].endswith("t") for j in every)
    assert {j["platform"] for j in every} == {"linux-x86_64"}


def test_plan_bad_input_is_one_line(run: Run) -> None:
    for argv, text in (
        (("plan", "tinykern==0.1.0", "--torch", "2.9"), "pass --sm"),
        (("plan", "tinykern==0.1.0", "--sm", "89", "--sm-from", "store"), "pass --sm"),
        (("plan", "tinykern==0.1.0", "--sm-from", "elsewhere"), "--sm-from elsewhere"),
        (("plan", "tinykern", "--sm", "89"), "NAME==VERSION"),
        (("plan", "tinykern==0.1.0", "--sm", "88"), "no GPU of compute capability 8.8"),
        (("plan", "tinykern==0.1.0", "--sm-from", "store"), "holds no wheels yet"),
    ):
        result = run(*argv)
        assert result.code == 2, argv
        assert (
            result.err.startswith("librarian: error: ") and result.err.count("\n") == 1 and text in result.err
        )


def test_plan_against_a_hub_repo_not_made_yet_holds_nothing_and_says_so(run: Run, loophub: object) -> None:
    """The example workflow's first run: its plan job runs before any build job has made the repo."""
    argv = ("plan", "tinykern==0.1.0", "--repo", "hf://datasets/team/not-made-yet", "--sm", "80", "--sm", "89",
            "--torch", "2.9", "--cuda", "13.0", "--python", "3.12")  # fmt: skip
    result = run(*argv, "--github")
    assert result.code == 0, result.err
    assert "hf://datasets/team/not-made-yet: no such dataset repo yet; it holds nothing" in result.err
    (job,) = json.loads(result.out)["include"]
    assert job["cells"] == ["sm80", "sm89"] and job["glibc"] == "2.28"
    assert run(*argv[:3], "--repo", "hf://datasets/team/not-made-yet", "--sm-from", "store").code == 2
