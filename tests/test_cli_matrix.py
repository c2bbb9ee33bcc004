"""`librarian matrix` and the combo check in publish, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run


@pytest.fixture(autouse=True)
def own_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "config" / "matrix.toml"
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(path))
    return path


def test_matrix_for_torch_2_8_lists_its_cuda_lines(run: Run) -> None:
    result = run("matrix", "--torch", "2.8")
    assert result.code == 0
    labels = {line.split()[2] for line in result.out.splitlines()[1:] if line.strip() and line[0] != "*"}
    assert labels == {"cu126torch2.8", "cu128torch2.8", "cu129torch2.8"}
    data = json.loads(run("matrix", "--torch", "2.8", "--json").out)
    assert data["schema"] == 1
    assert {c["cuda"] for c in data["combos"]} == {"12.6", "12.8", "12.9"}


def test_github_matrix_has_one_job_per_cell(run: Run) -> None:
    result = run(
        "matrix",
        "--torch",
        "2.8",
        "--torch",
        "2.9",
        "--python",
        "3.11",
        "--python",
        "3.12",
        "--platform",
        "linux-x86_64",
        "--github",
    )
    assert result.code == 0
    include = json.loads(result.out)["include"]
    cells = [(j["torch"], j["cuda"], j["python"]) for j in include]
    assert len(cells) == len(set(cells))
    listed = json.loads(
        run(
            "matrix",
            "--torch",
            "2.8",
            "--torch",
            "2.9",
            "--python",
            "3.11",
            "--python",
            "3.12",
            "--platform",
            "linux-x86_64",
            "--json",
        ).out
    )["combos"]
    assert set(cells) == {
        (c["torch"], c["cuda"], f"{c['python'][2]}.{c['python'][3:]}") for c in listed
    }  # cp312 -> 3.12
    assert all(j["TORCH_CUDA_ARCH_LIST"] is not None for j in include)


def test_publish_refuses_a_combo_pytorch_never_shipped(run: Run, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    result = run("publish", str(wheel), "--sm", "89", "--torch", "2.4", "--cuda", "12.9")
    assert result.code == 2
    assert result.err.startswith("librarian: error: ") and result.err.count("\n") == 1
    assert "PyTorch never shipped cu129torch2.4" in result.err and "cu124torch2.4" in result.err
    assert not (tmp_path / "wheelhouse").exists()
    allowed = run(
        "publish", str(wheel), "--sm", "89", "--torch", "2.4", "--cuda", "12.9", "--allow-unknown-combo"
    )
    assert allowed.code == 0


def test_refresh_from_a_page_adds_a_combo_that_matrix_then_shows(
    run: Run, tmp_path: Path, own_override: Path
) -> None:
    page = tmp_path / "index.html"
    page.write_text(
        '<html><body><a href="/whl/cu131/torch-2.14.0%2Bcu131-cp312-cp312-manylinux_2_28_x86_64.whl">'
        "torch-2.14.0+cu131-cp312-cp312-manylinux_2_28_x86_64.whl</a></body></html>"
    )
    assert "cu131torch2.14" not in run("matrix", "--torch", "2.14").out
    result = run("matrix", "refresh", "--from", str(page))
    assert result.code == 0, result.err
    assert "added" in result.out and own_override.is_file()
    assert "cu131torch2.14" in run("matrix", "--torch", "2.14").out
