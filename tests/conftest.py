"""Shared fixtures: run the CLI in-process as a user would (argv in; exit code, stdout, stderr out)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from librarian.cli import main

pytest_plugins = ["tests.loophub.fixtures"]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str  # stderr less the endpoint notice (below), which every loopback Hub command prints
    notices: tuple[
        str, ...
    ] = ()  # the lines taken out of ``err``: "the Hub here is http://127.0.0.1:... (HF_ENDPOINT)"


# Every Hub command against the loopback Hub says once that its endpoint is not huggingface.co; the
# tests of one-line errors and quiet runs look at the rest (tests/test_cli_words.py tests the notice).
ENDPOINT_NOTICE = "librarian: the Hub here is "


Run = Callable[..., Result]


def pull_args(
    package: str, *, sm: str = "89", torch: str = "2.8", python: str = "3.11", out: str = "out"
) -> tuple[str, ...]:
    """``pull PACKAGE`` for a stated machine (Linux x86_64), its wheel written into ``out``."""
    return ("pull", package, "--sm", sm, "--torch", torch, "--python", python, "--platform", "linux_x86_64",
            "-o", out)  # fmt: skip


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """librarian's caches under ``~/.cache`` (the readings of adopted wheels, build environments) go to a
    folder of the test's own, never the user's, unless the test sets ``LIBRARIAN_CACHE`` itself."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    # builds compile uncached unless a test asks for the compile cache (on by default, it would install
    # ccache into each build environment from the package index: the suite stays offline)
    monkeypatch.setenv("LIBRARIAN_BUILD_CACHE", "off")


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``run("publish", "x.whl", "--sm", "89")`` in ``tmp_path`` as the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LIBRARIAN_REPO", raising=False)
    monkeypatch.delenv("LIBRARIAN_DEBUG", raising=False)
    # an activated venv (the usual way to run pytest) is not the target a test means: tests that mean one
    # set VIRTUAL_ENV themselves
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    # the packaged stable-ABI table, whatever the user's override on this machine says
    monkeypatch.setenv("LIBRARIAN_STABLE_ABI", str(tmp_path / "no-stable-abi-override.toml"))

    def invoke(*argv: str) -> Result:
        capsys.readouterr()
        try:
            main(list(argv))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        captured = capsys.readouterr()
        lines = captured.err.splitlines(keepends=True)
        notices = tuple(line.rstrip("\n") for line in lines if line.startswith(ENDPOINT_NOTICE))
        err = "".join(line for line in lines if not line.startswith(ENDPOINT_NOTICE))
        return Result(code, captured.out, err, notices)

    return invoke
