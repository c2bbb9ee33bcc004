"""Promises the rest of the suite did not pin (README and shared/DESIGN.md): each test here fails on the breakage its
docstring names, which once passed the whole default suite."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from librarian.ops.machine.installer import installer_command
from tests.builders import make_wheel
from tests.conftest import Run

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("--torch", "2.8", "--cuda", "12.8")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_install_keeps_the_pinned_torch(tmp_path: Path) -> None:
    """Breakage: ``pull --install`` without ``--force-reinstall`` or ``--no-deps`` (pip would replace torch)."""
    with_pip = installer_command(sys.executable)
    assert with_pip[1:5] == ["-m", "pip", "install", "--force-reinstall"] and "--no-deps" in with_pip
    bare = tmp_path / "bare"  # a venv made without pip (as uv makes them): uv installs into it
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with_uv = installer_command(str(bare / "bin" / "python"))
    assert with_uv[1:3] == ["pip", "install"] and "--reinstall" in with_uv and "--no-deps" in with_uv


def test_replace_in_one_cell_leaves_the_other_cells_bytes(run: Run, tmp_path: Path) -> None:
    """Breakage: the local store writing in place instead of temp file then rename. The same bytes filed under
    two GPUs are hard links to one file: written in place, a --replace in one cell changed both."""
    old = make_wheel(
        tmp_path / "old", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", {"tinykern/__init__.py": b"OLD\n"}
    )
    assert run("publish", str(old), *FLAGS, "--sm", "86", "--sm", "89", "--trust-sm").code == 0
    cell86 = (
        tmp_path
        / "wheelhouse/tinykern/sm86/torch2.8-cu128/tinykern-0.1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl"
    )
    cell89 = Path(str(cell86).replace("/sm86/", "/sm89/"))
    before = sha(cell89)
    assert sha(cell86) == before
    new = make_wheel(
        tmp_path / "new", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", {"tinykern/__init__.py": b"NEW\n"}
    )
    replaced = run("publish", str(new), *FLAGS, "--sm", "86", "--trust-sm", "--replace")
    assert replaced.code == 0, replaced.err
    assert sha(cell86) != before and sha(cell89) == before  # the other cell keeps its bytes
    assert run("verify", "--deep").code == 0


def test_concurrent_publishers_into_one_local_store_all_land(tmp_path: Path) -> None:
    """Breakage: the local store's exclusive lock made shared: publishers then read the same index and the
    last one's write drops the others' entries."""
    wheels = [make_wheel(tmp_path / f"d{i}", f"kern{i}", "1.0", "cp311-cp311-linux_x86_64") for i in range(6)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "librarian",
                "publish",
                str(w),
                *FLAGS,
                "--sm",
                "89",
                "--repo",
                str(tmp_path / "store"),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for w in wheels
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    listed = subprocess.run(
        [sys.executable, "-m", "librarian", "ls", "--repo", str(tmp_path / "store"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert all(f'"kern{i}"' in listed for i in range(6))  # every publisher's entry is in the index
    verified = subprocess.run(
        [sys.executable, "-m", "librarian", "verify", "--repo", str(tmp_path / "store")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
