"""Shared helpers of the hostile suite: a small published store, and running the CLI in a subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from librarian.cli import main
from tests.builders import make_wheel

FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8")
CELL = "tinykern/sm89/torch2.8-cu128"
TAGS = "cp311-cp311-linux_x86_64"


def wheel_name(package: str = "tinykern", version: str = "0.1.0") -> str:
    """The labelled filename publish gives ``package`` ``version`` in the test cell."""
    return f"{package}-{version}+cu128torch2.8-{TAGS}.whl"


def build(directory: Path, package: str = "tinykern", version: str = "0.1.0", **kwargs: object) -> Path:
    """An unlabelled pure wheel (``--sm`` says its cell)."""
    files = {f"{package}/__init__.py": f"NAME = {package!r}\n".encode()}
    return make_wheel(directory, package, version, TAGS, files, **kwargs)  # type: ignore[arg-type]


def publish_once(root: Path, packages: tuple[str, ...]) -> Path:
    """``packages`` 0.1.0 built into ``root/dist`` and published into ``root/wheelhouse``, in-process: a
    module's template store, which :func:`copy_store` gives each test (the same bytes as publishing there)."""
    for package in packages:
        assert (
            _main("publish", str(build(root / "dist", package)), *FLAGS, "--repo", str(root / "wheelhouse"))
            == 0
        )
    assert _main("verify", "--deep", "--repo", str(root / "wheelhouse")) == 0
    return root


def copy_store(template: Path, tmp_path: Path) -> Path:
    """A fresh copy of :func:`publish_once`'s wheels and store in ``tmp_path``: its ``wheelhouse``."""
    shutil.copytree(template / "dist", tmp_path / "dist")
    shutil.copytree(template / "wheelhouse", tmp_path / "wheelhouse")
    return tmp_path / "wheelhouse"


def _main(*argv: str) -> int:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def cli(*argv: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``librarian ARGV`` in a fresh interpreter (where a hang or a kill must not take the tests down)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("LIBRARIAN_REPO", None)
    env.pop("LIBRARIAN_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "librarian", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


_RSS_MAIN = """
import resource, sys
from librarian.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = int(e.code or 0)
sys.stderr.write(f"rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
sys.exit(code)
"""


def cli_rss(
    *argv: str, cwd: Path, timeout: float = 60
) -> tuple[subprocess.CompletedProcess[str], float, str]:
    """``librarian ARGV`` in a fresh interpreter: the result, its peak RSS in MB and its stderr without it."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("LIBRARIAN_REPO", None)
    result = subprocess.run(
        [sys.executable, "-c", _RSS_MAIN, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    err, _, rss = result.stderr.rpartition("rss_kb=")
    return result, int(rss) / 1024, err


def shard(store: Path, package: str = "tinykern") -> dict[str, object]:
    """A shard, parsed."""
    data: dict[str, object] = json.loads((store / "index" / f"{package}.json").read_text())
    return data


def assert_one_line(err: str, *needles: str) -> None:
    """A single ``librarian: error:`` line with no traceback, containing each needle."""
    assert err.startswith("librarian: error: "), err
    assert "Traceback" not in err and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
