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
    err: str


Run = Callable[..., Result]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``run("publish", "x.whl", "--sm", "89")`` in ``tmp_path`` as the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LIBRARIAN_REPO", raising=False)
    monkeypatch.delenv("LIBRARIAN_DEBUG", raising=False)

    def invoke(*argv: str) -> Result:
        capsys.readouterr()
        try:
            main(list(argv))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke
