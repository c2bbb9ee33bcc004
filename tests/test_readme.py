"""Every command in README.md runs as written, in order, against a scratch store.

The two set-up commands at the top are left to ``.ci/run``. A loophub stands in for the Hub (for the
``hf://`` examples) and a canned page for PyTorch's index (``matrix refresh``); nothing leaves the machine.
Each line's exit status must be 0, or the one its comment names (``# exit 1: ...``).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from librarian.pytorch import refresh as matrix_refresh
from librarian.pytorch.matrix import load_matrix
from tests.conftest import Run
from tests.loophub.server import LoopHub

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LINKS = re.compile(r"\]\(([^)]+)\)")


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def commands() -> list[tuple[str, int]]:
    """Every command line after the two set-up blocks, with the exit status its comment expects."""
    found = []
    for block in bash_blocks(README.read_text())[2:]:
        for line in block.splitlines():
            if line.lstrip().startswith("#"):
                continue  # a comment line
            command, _, comment = line.partition("  #")
            if command.strip():
                expected = re.search(r"\bexit (\d)", comment)
                found.append((command.strip(), int(expected[1]) if expected else 0))
    return found


def with_extra_index(tmp_path: Path) -> dict[str, str]:
    """The environment with a pip configuration of its own that sets an absolute ``extra-index-url``, as
    company and CI images do (pip 26.3 then failed on a relative ``--index-url``: "Can't mix absolute and
    relative paths"). The test extra installs a pip that new (``pip>=26.3``)."""
    extra = tmp_path / "company-index"
    extra.mkdir()
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nextra-index-url = {extra.as_uri()}\ndisable-pip-version-check = 1\n")
    return {**os.environ, "PIP_CONFIG_FILE": str(config)}


def test_the_test_environment_has_a_pip_that_fails_on_a_relative_index_url() -> None:
    """The README's pip lines are run by the newest pip, the one that needs absolute index URLs."""
    from packaging.version import Version

    out = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True
    )
    assert Version(out.stdout.split()[1]) >= Version("26.3"), out.stdout


def index_page(url: str, timeout: float = 30.0) -> tuple[str, str | None]:
    """PyTorch's page for one CUDA line, made from the packaged matrix (the network's stand-in)."""
    line = re.search(r"/cu(\d+)/torch/", url)
    assert line is not None, url
    torches = sorted({c.torch for c in load_matrix().all_combos if f"{c.cuda[0]}{c.cuda[1]}" == line[1]})
    names = [f"torch-{t[0]}.{t[1]}.0+cu{line[1]}-cp312-cp312-manylinux_2_28_x86_64.whl" for t in torches]
    return "".join(f'<a href="{n}">{n}</a>\n' for n in names), "text/html"


def test_the_set_up_commands_are_two_and_unchanged() -> None:
    setup = bash_blocks(README.read_text())[:2]
    assert "pip install -e . && .venv/bin/librarian publish samples/dist/*.whl" in setup[0]
    assert (
        setup[1].strip()
        == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest -q"
    )


def test_links_stay_inside_the_repo() -> None:
    for target in LINKS.findall(README.read_text()):
        if target.startswith(("http://", "https://", "#")):
            continue
        assert not target.startswith(("/", "..")), target
        assert (ROOT / target.split("#")[0]).exists(), target


@pytest.mark.slow
def test_every_readme_command_runs(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("samples", "benchmarks"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(tmp_path / "matrix.toml"))
    monkeypatch.setattr(matrix_refresh, "read_source", index_page)
    monkeypatch.setattr("typer.completion._get_shell_name", lambda: "bash")
    lines = commands()
    assert len(lines) > 20 and any("hf://" in c for c, _ in lines)
    pip_env = with_extra_index(tmp_path)
    for command, expected in lines:
        argv = shlex.split(command)
        if argv[0] == "librarian":
            args = [m for a in argv[1:] for m in (sorted(glob.glob(a)) if "*" in a else [a])]
            result = run(*args)
            code, err = result.code, result.err
        else:
            if argv[0] == "pip":  # into a folder of the test's own, not the environment running the tests
                argv = [sys.executable, "-m", "pip", *argv[1:], "--target", str(tmp_path / "site")]
                argv = [a.replace("$PWD", str(tmp_path)) for a in argv]  # as the shell would
            elif argv[0] == "python":
                argv = [sys.executable, *argv[1:]]
            else:
                argv = ["bash", "-c", command]
            done = subprocess.run(
                argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=pip_env
            )
            code, err = done.returncode, done.stderr
        assert code == expected, f"{command}: exit {code}, expected {expected}\n{err}"


def test_the_python_examples_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each ```python block of the README, run from the checkout as it says, prints what its comments say."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert blocks
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    out = capsys.readouterr().out
    assert out.startswith("runs its own sm_90 SASS\n") and "GPU arch" in out


def test_every_command_has_its_section_in_the_readme() -> None:
    """Issue 46 item 8: each command of the app (``librarian --help``) has a ``### name`` section under the
    README's ``## Commands``; ``reindex`` had none."""
    from librarian.cli.app import Commands

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    commands_part = readme.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    sections = {line[4:].strip() for line in commands_part.splitlines() if line.startswith("### ")}
    names = set(Commands.modules)
    assert names and not names - sections, sorted(names - sections)
