"""Seeded fuzzing of the wheel readers (issue 10): every mutant ends in exit 0, 1 or 2, in one line, quickly.

The default run is small (seconds); ``-m hostile_slow`` runs 10,000 mutants in worker processes and
checks their peak memory too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.hostile.fuzz import Stats, fuzz, fuzz_index, run_command

ROOT = Path(__file__).resolve().parents[2]


def test_fuzz_a_few_hundred_mutants(tmp_path: Path) -> None:
    stats = fuzz(seed=20261201, count=200, workdir=tmp_path, limit=20)
    assert stats.failures() == [], stats.to_json()
    assert stats.codes[0] and stats.codes[2]  # the mutants reach both success and refusal


@pytest.mark.hostile_slow
def test_fuzz_ten_thousand_mutants(tmp_path: Path) -> None:
    workers = int(os.environ.get("LIBRARIAN_FUZZ_WORKERS", "2"))
    count = int(os.environ.get("LIBRARIAN_FUZZ_COUNT", "10000"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    def worker(seed: int) -> subprocess.Popen[str]:
        argv = ["--seed", str(seed), "--count", str(count // workers), "--workdir", str(tmp_path / f"w{seed}")]
        return subprocess.Popen([sys.executable, "-m", "tests.hostile.fuzz", *argv], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip

    procs = [worker(seed) for seed in range(1, workers + 1)]
    results = [json.loads(p.communicate(timeout=3 * 3600)[0]) for p in procs]
    total = {k: sum(r[k] for r in results) for k in ("mutants", "tracebacks", "hangs", "bad_codes", "half_written", "accepted_then_rejected")}
    peak = max(r["peak_rss_mb"] for r in results)
    slowest = max(r["slowest_s"] for r in results)
    sys.stderr.write(f"fuzz: {json.dumps({**total, 'peak_rss_mb': peak, 'slowest_s': slowest})}\n")
    assert total["mutants"] == count
    assert total["tracebacks"] == total["hangs"] == total["bad_codes"] == 0, results
    assert total["half_written"] == total["accepted_then_rejected"] == 0, results
    assert peak < 300 and slowest < 20, results


def _index_fuzz(tmp_path: Path, count: int) -> Stats:
    stats = Stats()
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    store = tmp_path / "S"
    publish = ["publish", str(wheel), "--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", str(store), "--create"]
    assert run_command(publish, stats, "setup", 60)[0] == 0
    fuzz_index(seed=7, count=count, store=store, stats=stats)
    return stats


def test_fuzz_index_content(tmp_path: Path) -> None:
    """Mutated root and shard values through verify, ls, pull and gc: one line, exit 0, 1 or 2."""
    stats = _index_fuzz(tmp_path, 60)
    assert stats.failures() == [], stats.to_json()


@pytest.mark.hostile_slow
def test_fuzz_index_content_thousands(tmp_path: Path) -> None:
    stats = _index_fuzz(tmp_path, int(os.environ.get("LIBRARIAN_INDEX_FUZZ_COUNT", "2000")))
    sys.stderr.write(f"index fuzz: {json.dumps(stats.to_json())}\n")
    assert stats.failures() == [], stats.to_json()
