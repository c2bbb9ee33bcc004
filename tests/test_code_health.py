"""The project's own checks, so CI enforces them: ruff, and mypy --strict on the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} is not installed in this environment (pip install -e '.[test]' brings it)")
    return found


def test_ruff_is_clean() -> None:
    result = subprocess.run([tool("ruff"), "check", "--quiet", "."], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = subprocess.run([tool("mypy"), "--no-error-summary"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
