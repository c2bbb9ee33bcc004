"""The project's own checks, so CI enforces them: ruff, and mypy --strict on the package."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from librarian import demands
from librarian.compat import tomllib

ROOT = Path(__file__).resolve().parent.parent


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} is not installed in this environment (pip install -e '.[test]' brings it)")
    return found


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [tool("ruff"), "check", "--quiet", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    result = subprocess.run(
        [tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr


def test_ruff_selects_more_than_its_defaults() -> None:
    # I (imports), B (bugbear), UP (pyupgrade), SIM (simplify) on top of ruff's defaults, where CI checks them.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert {"I", "B", "UP", "SIM"} <= set(config["tool"]["ruff"]["lint"]["extend-select"])


def test_mypy_strict_is_clean() -> None:
    result = subprocess.run(
        [tool("mypy"), "--no-error-summary"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_holds_a_demand_row_to_one_need(tmp_path: Path) -> None:
    """The table's rows are typed by their need: a row whose ``check`` takes another demand's need is a type
    error, and the same row with its own ``check`` is not."""
    row = "from librarian.demands import Row, Sees, gpu, torch\nfrom librarian.demands.base import Demand\n"
    (tmp_path / "good_row.py").write_text(row + "GOOD = Row(Demand.GPU, Sees.NVIDIA, gpu.needs, gpu.check)\n")
    (tmp_path / "bad_row.py").write_text(row + "BAD = Row(Demand.GPU, Sees.NVIDIA, gpu.needs, torch.check)\n")

    def mypy(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool("mypy"), "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), name],
            cwd=tmp_path, capture_output=True, text=True, check=False, env={**os.environ, "MYPYPATH": str(ROOT)},
        )  # fmt: skip

    assert mypy("good_row.py").returncode == 0, mypy("good_row.py").stdout
    bad = mypy("bad_row.py")
    assert bad.returncode == 1 and "bad_row.py:3" in bad.stdout, bad.stdout + bad.stderr


# --- one judgement: nothing outside librarian/demands decides a demand itself ---------------------------------


def _demand_imports(source: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """Every import of ``librarian.demands`` or a module inside it: (line, module, names imported)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("librarian.demands"):
            found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, ()) for a in node.names if a.name.startswith("librarian.demands")]
    return found


def judgement_bypasses(root: Path) -> list[str]:
    """Where a module outside ``librarian/demands`` reaches past the judgement's public API (``__all__``)."""
    public = set(demands.__all__)
    bad = []
    for path in sorted(root.rglob("*.py")):
        if "demands" in path.relative_to(root).parts:
            continue
        for line, module, names in _demand_imports(path.read_text()):
            where = f"{path.relative_to(root.parent)}:{line}"
            if module != "librarian.demands":
                bad.append(f"{where}: imports {module} (use librarian.demands' public names)")
            else:
                bad += [
                    f"{where}: imports librarian.demands.{n} (not in its __all__)"
                    for n in names
                    if n not in public
                ]
    return bad


def test_commands_reach_the_demands_only_through_the_judgement() -> None:
    assert judgement_bypasses(ROOT / "librarian") == []


# --- one opened wheel: nothing outside librarian/wheel reaches past its face ----------------------------------


def wheel_face_bypasses(root: Path) -> list[str]:
    """Where a module outside ``librarian/wheel`` imports one of its modules, or a name not in its ``__all__``
    (a zip directory threaded by hand, a reader called around the opened wheel)."""
    import librarian.wheel as face

    public = set(face.__all__)
    bad = []
    for path in sorted(root.rglob("*.py")):
        if "wheel" in path.relative_to(root).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("librarian.wheel"):
                if node.module != "librarian.wheel":
                    bad.append(f"{where}: imports {node.module} (use librarian.wheel's public names)")
                else:
                    bad += [f"{where}: imports librarian.wheel.{a.name} (not in its __all__)"
                            for a in node.names if a.name not in public]  # fmt: skip
            elif isinstance(node, ast.Import):
                bad += [f"{where}: imports {a.name} (use librarian.wheel's public names)"
                        for a in node.names if a.name.startswith("librarian.wheel.")]  # fmt: skip
            elif isinstance(node, ast.Constant) and re.fullmatch(r"librarian\.wheel\.\w+", str(node.value)):
                bad.append(f"{where}: names {node.value} (use librarian.wheel)")  # librarian/__init__'s _API
    return bad


def test_the_rest_reaches_wheels_only_through_the_face() -> None:
    import librarian.wheel as face

    assert sorted(face.__all__) == sorted(face._FACE)  # every public name is one the face can load
    assert wheel_face_bypasses(ROOT / "librarian") == []


def test_the_wheel_face_check_fails_on_a_bypass(tmp_path: Path) -> None:
    ops = tmp_path / "librarian" / "ops"
    ops.mkdir(parents=True)
    (ops / "sneaky.py").write_text(
        "from librarian.wheel import zipraw\nfrom librarian.wheel.deep import read_deep\n"
    )
    assert wheel_face_bypasses(tmp_path / "librarian") == [
        "librarian/ops/sneaky.py:1: imports librarian.wheel.zipraw (not in its __all__)",
        "librarian/ops/sneaky.py:2: imports librarian.wheel.deep (use librarian.wheel's public names)",
    ]


def test_the_judgement_check_fails_on_a_bypass(tmp_path: Path) -> None:
    ops = tmp_path / "librarian" / "ops"
    ops.mkdir(parents=True)
    (ops / "sneaky.py").write_text(
        "from librarian.demands import gpu\nfrom librarian.demands.glibc import check\n"
    )
    assert judgement_bypasses(tmp_path / "librarian") == [
        "librarian/ops/sneaky.py:1: imports librarian.demands.gpu (not in its __all__)",
        "librarian/ops/sneaky.py:2: imports librarian.demands.glibc (use librarian.demands' public names)",
    ]


MAX_MODULE_LINES = 400  # a module that fits in a head (issue 46): split along a responsibility it has


def test_no_module_is_over_400_lines() -> None:
    over = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / "librarian").rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


MAX_FUNCTION_LINES = 60  # a function a reader takes in at once; the data tables are module-level values


def long_functions(root: Path, most: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Every function (and method) under ``root`` longer than ``most`` lines, its signature and docstring
    counted, as ``path:line name`` -> lines."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.end_lineno is None:
                continue
            if (lines := node.end_lineno - node.lineno + 1) > most:
                found[f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"] = lines
    return found


def test_no_function_is_over_60_lines() -> None:
    assert long_functions(ROOT / "librarian") == {}


def test_a_long_function_is_named_with_its_length(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    (package / "long.py").write_text(
        f"def short():\n    return 1\n\n\nclass C:\n    def long(self):\n{body}\n"
    )
    assert long_functions(package) == {"pkg/long.py:6 long": 61}
