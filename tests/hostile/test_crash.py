"""SIGKILL during publish and gc (shared/DESIGN.md: every change to a store is one atomic step): afterwards ``verify`` passes, or names what ``reindex`` repairs.

Opt-in (``-m hostile_slow``): each trial copies a small store, starts ``librarian publish`` or ``gc --yes``
in a child process, kills it with SIGKILL after a random delay spread over the command's usual run time,
then checks the store: verify exits 0, or exits 1 and, after ``reindex``, exits 0; and no wheel the index
lists is missing or torn (verify checks sizes and sha256). ``LIBRARIAN_CRASH_TRIALS`` sets the count.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.hostile.helpers import FLAGS, build, cli

ROOT = Path(__file__).resolve().parents[2]
WHEELS = 12


def _child(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LIBRARIAN_REPO", None)
    return subprocess.Popen(
        [sys.executable, "-m", "librarian", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _template(base: Path) -> tuple[Path, list[Path]]:
    """A store holding torch 2.7 and 2.8 wheels, and a batch of new wheels to publish into it."""
    dist = base / "dist"
    for torch in ("2.7", "2.8"):
        old = [
            build(dist / torch, f"pkg{i}", "0.1.0", data_files={"data/blob.bin": os.urandom(200_000)})
            for i in range(WHEELS)
        ]
        result = cli(
            "publish",
            *map(str, old),
            "--sm",
            "89",
            "--torch",
            torch,
            "--cuda",
            "12.8",
            "--repo",
            "S",
            cwd=base,
        )
        assert result.returncode == 0, result.stderr
    new = [
        build(dist / "new", f"pkg{i}", "0.2.0", data_files={"data/blob.bin": os.urandom(300_000)})
        for i in range(WHEELS)
    ]
    return base / "S", new


JOURNAL = ".librarian-journal.json"


def _wait_for(child: subprocess.Popen[bytes], path: Path, limit: float) -> float | None:
    """Poll until ``path`` exists (the change has begun); the time it took, or None if it never did."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit and child.poll() is None:
        if path.exists():
            return time.perf_counter() - start
        time.sleep(0.0005)
    return None


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """The command's run time, and how long its change to the store (journal to exit) lasts."""
    start = time.perf_counter()
    child = _child(argv, cwd)
    began = _wait_for(child, cwd / "S" / JOURNAL, 120)
    assert child.wait(timeout=120) == 0
    total = time.perf_counter() - start
    return total, total - (began if began is not None else total)


@pytest.mark.hostile_slow
def test_sigkill_during_publish_and_gc_is_repaired(tmp_path: Path) -> None:
    trials = int(os.environ.get("LIBRARIAN_CRASH_TRIALS", "80"))
    rng = random.Random(20261201)
    template, new = _template(tmp_path / "template")
    commands = {
        "publish": ["publish", *map(str, new), *FLAGS, "--repo", "S"],
        "gc": ["gc", "--drop-torch", "2.7", "--yes", "--allow-empty", "--repo", "S"],
    }
    usual = {}
    for name, argv in commands.items():
        probe = tmp_path / f"probe-{name}"
        shutil.copytree(template, probe / "S", symlinks=True)
        usual[name] = _timed(argv, probe)
    outcomes: Counter[str] = Counter()
    for trial in range(trials):
        name = "publish" if trial % 2 == 0 else "gc"
        work = tmp_path / f"t{trial}"
        shutil.copytree(template, work / "S", symlinks=True)
        child = _child(commands[name], work)
        run_time, change_time = usual[name]
        if trial % 4 == 0:  # a quarter of the kills at any moment of the run, the rest inside the change
            time.sleep(rng.uniform(0.3, 1.05) * run_time)
        elif _wait_for(child, work / "S" / JOURNAL, 2 * run_time) is not None:
            time.sleep(rng.uniform(0, 0.6) * change_time)
        killed = child.poll() is None
        if killed:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        verify = cli("verify", "--repo", "S", cwd=work)
        assert verify.returncode in (0, 1), verify.stderr
        assert "Traceback" not in verify.stderr
        if verify.returncode == 1:
            problems = verify.stdout
            assert "in the index but not in the store" not in problems, problems  # nothing listed is gone
            assert "sha256" not in problems and "size" not in problems, problems  # nothing torn
            repaired = cli("reindex", "--repo", "S", cwd=work)
            assert repaired.returncode == 0, repaired.stderr + repaired.stdout
            again = cli("verify", "--repo", "S", cwd=work)
            assert again.returncode == 0, f"trial {trial} ({name}): reindex left {again.stdout}"
            outcomes[f"{name}: killed, verify named it, reindex repaired it"] += 1
        else:
            outcomes[f"{name}: {'killed' if killed else 'finished'}, verify passed"] += 1
        shutil.rmtree(work)
    sys.stderr.write(f"crash trials: {trials}, usual run times {usual}: {dict(outcomes)}\n")
    assert sum(v for k, v in outcomes.items() if "repaired" in k) > 0  # the kills reached the window


def _hand_template(base: Path) -> Path:
    """A hand-made wheelhouse: distinct real CUDA wheels, half filed where they serve, half under sm75
    (no code there): adoption indexes the first and refiles the second."""
    import zipfile

    from tests.builders import make_wheel

    sample = ROOT / "samples/dist/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(sample) as zf:
        so = zf.read("tinykern/_tinykern.so")
    store = base / "S"
    for k in range(WHEELS):
        cell = store / f"tinykern/sm{'89' if k % 2 else '75'}/torch2.9-cu130"
        files = {
            "tinykern/__init__.py": b"X = 1\n",
            "tinykern/_tinykern.so": so,
            "tinykern/pad": os.urandom(200_000),
        }
        make_wheel(cell, "tinykern", f"0.1.{k}", "cp312-cp312-linux_x86_64", files)
    return store


def _contents(store: Path) -> set[bytes]:
    import hashlib

    return {hashlib.sha256(p.read_bytes()).digest() for p in store.rglob("*.whl")}


@pytest.mark.hostile_slow
def test_sigkill_during_adoption_loses_no_wheel(tmp_path: Path) -> None:
    trials = int(os.environ.get("LIBRARIAN_CRASH_TRIALS", "40"))
    rng = random.Random(20261206)
    template = _hand_template(tmp_path / "template")
    wheels = _contents(template)
    argv = ["reindex", "--adopt", "--refile", "--repo", "S"]
    probe = tmp_path / "probe"
    shutil.copytree(template, probe / "S")
    usual, _ = _timed(argv, probe)
    outcomes: Counter[str] = Counter()
    for trial in range(trials):
        work = tmp_path / f"a{trial}"
        shutil.copytree(template, work / "S")
        env_cache = work / "cache"  # each trial reads afresh: the kill may land while wheels are read
        child = subprocess.Popen(
            [sys.executable, "-m", "librarian", *argv],
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(ROOT), "LIBRARIAN_CACHE": str(env_cache)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 1.1) * usual)
        killed = child.poll() is None
        if killed:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        assert _contents(work / "S") >= wheels, f"trial {trial}: a wheel was lost"
        again = cli(*argv, cwd=work)
        assert again.returncode == 0, again.stdout + again.stderr
        verify = cli("verify", "--deep", "--repo", "S", cwd=work)
        assert verify.returncode == 0, f"trial {trial}: {verify.stdout}"
        outcomes["killed" if killed else "finished"] += 1
        shutil.rmtree(work)
    sys.stderr.write(f"adoption kill trials: {trials}, usual run time {usual:.2f} s: {dict(outcomes)}\n")
    assert outcomes["killed"] > 0
