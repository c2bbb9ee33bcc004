"""The example GitHub Actions workflow: valid YAML whose librarian commands are valid for this librarian."""

from __future__ import annotations

import json
import re
import shlex
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
    return [c for c in commands if c[0] in {"matrix", "publish", "gc", "pull", "verify"}]


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
    for job in ("build", "gc"):
        for argv in librarian_commands(jobs[job]):
            help_text = run(argv[0], "--help").out
            for flag in (a for a in argv if a.startswith("--")):
                assert flag in help_text, f"{argv[0]} has no {flag}"
