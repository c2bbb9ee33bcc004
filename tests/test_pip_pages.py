"""Plain pip consumes a store through its per-combo pages, without librarian: locally and on the Hub."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

FILE = "tinykern-0.1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl"


def pip_download(find_links: str, dest: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-index",
        "--no-deps",
        "--find-links",
        find_links,
        "--python-version",
        "3.11",
        "--platform",
        "linux_x86_64",
        "--only-binary=:all:",
        "-d",
        str(dest),
        "tinykern",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)


def publish_two_combos(run: Run, tmp_path: Path, *repo: str) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    for cuda in ("12.8", "12.9"):  # cu129 sorts higher: a mixed page would hand it to a cu128 machine
        result = run("publish", str(wheel), "--sm", "89", "--torch", "2.8", "--cuda", cuda, *repo)
        assert result.code == 0, result.err


def test_pip_installs_from_a_local_page(run: Run, tmp_path: Path) -> None:
    publish_two_combos(run, tmp_path)
    page = tmp_path / "wheelhouse" / "pages" / "sm89-torch2.8-cu128.html"
    result = pip_download(str(page), tmp_path / "got")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "got").iterdir()] == [FILE]


def test_pip_installs_from_a_hub_page(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    publish_two_combos(run, tmp_path, "--repo", "hf://datasets/team/wheels", "--create")
    url = f"{loophub.url}/datasets/team/wheels/resolve/main/pages/sm89-torch2.8-cu128.html"
    result = pip_download(url, tmp_path / "got")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "got").iterdir()] == [FILE]
    card = loophub.files("team/wheels")["README.md"].decode()
    assert "torch2.8-cu128" in card and "torch2.8-cu129" in card and "librarian pull tinykern" in card


def test_pip_index_url_installs_from_a_local_stores_simple_tree(run: Run, tmp_path: Path) -> None:
    """PEP 503 beside each page: ``pip --index-url .../pages/<combo>/simple/`` (a local store, or any static
    host that serves a folder's index.html; not the Hub's resolve/, which serves no folder)."""
    publish_two_combos(run, tmp_path)
    simple = (tmp_path / "wheelhouse" / "pages" / "sm89-torch2.8-cu128" / "simple").as_uri() + "/"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--index-url",
        simple,
        "--python-version",
        "3.11",
        "--platform",
        "linux_x86_64",
        "--only-binary=:all:",
        "-d",
        str(tmp_path / "got"),
        "tinykern",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "got").iterdir()] == [FILE]  # the cu128 build, never the cu129 one
