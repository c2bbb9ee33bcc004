"""Seeded fuzzing of the wheel readers (the README's one-line errors): every mutant ends in exit 0, 1 or 2, in one line, quickly.

The default run is small (a few dozen mutants per test, seeded, reaching every kind of mutation);
``-m hostile_slow`` runs the hundreds and thousands: 200 wheel mutants in-process, 10,000 in worker
processes (peak memory checked too), and 2,000 index mutants.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.builders import make_wheel, record_hash
from tests.conftest import Run, pull_args
from tests.hostile import mutants
from tests.hostile.fuzz import FLAGS, WHEEL, Stats, fuzz, fuzz_index, run_command
from tests.hostile.mutants import KINDS
from tests.hostile.surfaces import (
    RECORD_FIELDS,
    flag_argv,
    fuzz_surfaces,
    matrix_text,
    mutate_record,
    reply_mutants,
    settings_text,
    surfaces,
)
from tests.loophub.server import LoopHub

ROOT = Path(__file__).resolve().parents[2]


# The first 40 mutants of this seed already use every kind of mutation; 200 was the default run until the
# suite had to fit in under a minute, and stays as the slow run (the same seed: the 40 are its first 40).
@pytest.mark.parametrize("count", [40, pytest.param(200, marks=pytest.mark.hostile_slow)])
def test_fuzz_mutants(tmp_path: Path, count: int) -> None:
    stats = fuzz(seed=20261201, count=count, workdir=tmp_path, limit=20)
    assert stats.failures() == [], stats.to_json()
    assert stats.codes[0] and stats.codes[2]  # the mutants reach both success and refusal
    assert set(stats.kinds) == set(KINDS), stats.kinds  # every kind of mutation was tried


@pytest.mark.hostile_slow
def test_fuzz_ten_thousand_mutants(tmp_path: Path) -> None:
    workers = int(os.environ.get("LIBRARIAN_FUZZ_WORKERS", "2"))
    count = int(os.environ.get("LIBRARIAN_FUZZ_COUNT", "10000"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def worker(seed: int) -> subprocess.Popen[str]:
        argv = [
            "--seed",
            str(seed),
            "--count",
            str(count // workers),
            "--workdir",
            str(tmp_path / f"w{seed}"),
        ]
        return subprocess.Popen(
            [sys.executable, "-m", "tests.hostile.fuzz", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    procs = [worker(seed) for seed in range(1, workers + 1)]
    results = [json.loads(p.communicate(timeout=3 * 3600)[0]) for p in procs]
    total = {
        k: sum(r[k] for r in results)
        for k in ("mutants", "tracebacks", "hangs", "bad_codes", "half_written", "accepted_then_rejected")
    }
    peak = max(r["peak_rss_mb"] for r in results)
    slowest = max(r["slowest_s"] for r in results)
    sys.stderr.write(f"fuzz: {json.dumps({**total, 'peak_rss_mb': peak, 'slowest_s': slowest})}\n")
    assert total["mutants"] == count
    assert total["tracebacks"] == total["hangs"] == total["bad_codes"] == 0, results
    assert total["half_written"] == total["accepted_then_rejected"] == 0, results
    assert peak < 300 and slowest < 20, results


def _index_fuzz(tmp_path: Path, count: int, seed: int = 7) -> Stats:
    stats = Stats()
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    store = tmp_path / "S"
    publish = [
        "publish",
        str(wheel),
        "--sm",
        "89",
        "--torch",
        "2.8",
        "--cuda",
        "12.8",
        "--repo",
        str(store),
        "--create",
    ]
    assert run_command(publish, stats, "setup", 60)[0] == 0
    fuzz_index(seed=seed, count=count, store=store, stats=stats)
    return stats


def test_fuzz_index_content(tmp_path: Path) -> None:
    """Mutated root and shard values through verify, ls, pull and gc: one line, exit 0, 1 or 2.

    24 mutants of seed 1 replace, drop and add a value in both the root and the shard (60 of seed 7 were
    the default before; they are the first 60 of the slow run below)."""
    stats = _index_fuzz(tmp_path, 24, seed=1)
    assert stats.failures() == [], stats.to_json()
    made = {kind for kind in stats.kinds if not kind.endswith(":none")}
    assert made == {
        f"{f}:{how}" for f in ("index.json", "tinykern.json") for how in ("replace", "drop", "add")
    }, made


@pytest.mark.hostile_slow
def test_fuzz_index_content_thousands(tmp_path: Path) -> None:
    stats = _index_fuzz(tmp_path, int(os.environ.get("LIBRARIAN_INDEX_FUZZ_COUNT", "2000")))
    sys.stderr.write(f"index fuzz: {json.dumps(stats.to_json())}\n")
    assert stats.failures() == [], stats.to_json()


# --- the surfaces a whole-wheel mutant rarely reaches (tests/hostile/surfaces.py) -------------------------


@pytest.mark.parametrize("count", [300, pytest.param(2000, marks=pytest.mark.hostile_slow)])
def test_fuzz_member_surfaces(count: int) -> None:
    """PE import and delay-load tables, PE headers, Mach-O load commands, symbol tables and universal
    headers: every mutant is read or refused in one line, within seconds of CPU."""
    stats = fuzz_surfaces(seed=20261204, count=count)
    assert stats.escapes == [] and stats.slow == [], stats.to_json()
    for surface in surfaces():  # each surface survives some mutants, and each format refuses some
        assert stats.outcomes[f"{surface.name}: read"], (surface.name, stats.to_json())
    for fmt in ("pe", "macho"):
        assert sum(n for k, n in stats.outcomes.items() if k.startswith(fmt) and k.endswith("refused")), fmt


@pytest.mark.hostile_slow
def test_fuzz_ten_thousand_member_surface_mutants() -> None:
    """10,000 member mutants in a worker process of its own (its peak memory is its own)."""
    count = int(os.environ.get("LIBRARIAN_FUZZ_COUNT", "10000"))
    done = subprocess.run(
        [sys.executable, "-m", "tests.hostile.surfaces", "--seed", "7", "--count", str(count)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        check=True, timeout=3600,
    )  # fmt: skip
    result = json.loads(done.stdout)
    sys.stderr.write(f"surface fuzz: {json.dumps(result)}\n")
    assert result["mutants"] == count and result["escapes"] == result["slow"] == 0, result
    assert result["peak_rss_mb"] < 300, result


def _record_fuzz(tmp_path: Path, count: int, seed: int) -> Stats:
    stats = Stats()
    rng = random.Random(seed)
    members = mutants.standard_members()
    di = "tinykern-0.1.0.dist-info"
    record = "".join(f"{m},{record_hash(d)},{len(d)}\n" for m, d in members.items()) + f"{di}/RECORD,,\n"
    for i in range(count):
        text, how = mutate_record(record, rng)
        stats.kinds[how] += 1
        stats.mutants += 1
        wheel = mutants.raw_wheel(tmp_path / f"m{i}", WHEEL, {**members, f"{di}/RECORD": text.encode()},
                                  record=False)  # fmt: skip
        label = f"record seed {seed} mutant {i} ({how})"
        run_command(["inspect", str(wheel)], stats, label, 20)
        code, _, _ = run_command(["publish", str(wheel), *FLAGS, "--repo", str(tmp_path / "S"), "--create"],
                                 stats, label, 20)  # fmt: skip
        if code == 0:
            vcode, vout, _ = run_command(
                ["verify", "--deep", "--repo", str(tmp_path / "S")], stats, label, 20
            )
            if vcode:
                stats.accepted_then_rejected.append(f"{label}: {vout.strip()[:200]}")
    return stats


@pytest.mark.parametrize("count", [40, pytest.param(1000, marks=pytest.mark.hostile_slow)])
def test_fuzz_record_fields(tmp_path: Path, count: int) -> None:
    """Hostile RECORD fields (sizes, digests, paths, quotes, field counts, a field past csv's limit) through
    inspect, publish and verify --deep: one line, exit 0, 1 or 2, never accepted then rejected."""
    stats = _record_fuzz(tmp_path, count, seed=3)
    assert stats.failures() == [], stats.to_json()
    assert len(stats.kinds) == len(RECORD_FIELDS), stats.kinds
    assert stats.codes[2], stats.codes  # most forms are refused


@pytest.mark.parametrize("count", [12, pytest.param(300, marks=pytest.mark.hostile_slow)])
def test_fuzz_hub_replies(run: Run, loophub: LoopHub, tmp_path: Path, count: int) -> None:
    """Bent repo-info replies (truncated, junk, a value replaced, dropped or added) and redirect loops
    through ls and pull: each exits 0, 2 or 3 in one line, never a traceback."""
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    repo = "hf://datasets/team/wheels"
    assert run("publish", str(wheel), *FLAGS, "--trust-sm", "--repo", repo, "--create").code == 0
    rng = random.Random(11)
    commands = [
        ("ls", "--repo", repo),
        pull_args("tinykern", torch="2.8", out=str(tmp_path / "o")) + ("--repo", repo),
    ]
    seen: Counter[int] = Counter()
    for i in range(count):
        loophub.clear_faults()
        body, how = reply_mutants(rng)
        loophub.answer("repo_info", body)
        for argv in commands:
            result = run(*argv)
            seen[result.code] += 1
            label = f"reply mutant {i} ({how}): {argv[0]}"
            assert result.code in (0, 2, 3), f"{label}: exit {result.code}: {result.err}"
            assert "Traceback" not in result.err, label
            if result.code:
                assert result.err.count("librarian: error:") == 1 and result.err.endswith("\n"), (
                    label,
                    result.err,
                )
    loophub.clear_faults()
    assert seen[3], seen  # most bent replies end the command as the server's fault


# --- flags and settings files -------------------------------------------------------------------------------


def _contract(run: Run, argv: list[str], label: str) -> int:
    result = run(*argv)
    assert result.code in (0, 1, 2), f"{label}: exit {result.code}: {result.err[-500:]}"
    assert "Traceback" not in result.err, label
    if result.code == 2:
        assert result.err.count("librarian: error:") == 1, (label, result.err[-500:])
    return result.code


@pytest.mark.parametrize("count", [60, pytest.param(2000, marks=pytest.mark.hostile_slow)])
def test_fuzz_flags(run: Run, tmp_path: Path, count: int) -> None:
    """doctor and pull with hostile --sm/--torch/--cuda/--python/--platform/--glibc/--driver/--gpu values:
    exit 0, 1 or 2 in one line, each within seconds of CPU."""
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    assert run("publish", str(wheel), *FLAGS, "--trust-sm").code == 0
    rng = random.Random(37)
    seen: Counter[int] = Counter()
    for i in range(count):
        argv = flag_argv(rng, str(wheel), str(tmp_path / "out"))
        start = time.process_time()
        seen[_contract(run, argv, f"flags mutant {i}: {' '.join(a[:40] for a in argv)}")] += 1
        assert time.process_time() - start < 10, argv
    assert seen[2] and (seen[0] or seen[1]), seen  # the values reach both refusal and a judgement


@pytest.mark.parametrize("count", [40, pytest.param(1000, marks=pytest.mark.hostile_slow)])
def test_fuzz_settings_files(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """A bent [tool.librarian] table and a bent matrix override (LIBRARIAN_MATRIX) through ls, matrix and
    doctor: exit 0, 1 or 2 in one line."""
    from librarian.compat import tomllib

    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    assert run("publish", str(wheel), *FLAGS, "--trust-sm").code == 0
    packaged = tomllib.loads((ROOT / "librarian" / "data" / "matrix.toml").read_text())
    # TOML dates as text: the mutator works on JSON-shaped data
    base = json.loads(json.dumps({"schema": packaged["schema"], "torch": packaged["torch"][:1]}, default=str))
    rng = random.Random(38)
    override = tmp_path / "matrix.toml"
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(override))
    seen: Counter[int] = Counter()
    for i in range(count):
        (tmp_path / "pyproject.toml").write_text(settings_text(rng) if i % 2 else "")
        override.write_text(matrix_text(rng, base) if i % 2 == 0 else "")
        for argv in (
            ["ls"],
            ["matrix"],
            ["doctor", str(wheel), "--sm", "89", "--torch", "2.9", "--python", "3.11"],
        ):
            seen[_contract(run, argv, f"settings mutant {i}: {argv[0]}")] += 1
    assert seen[2] and seen[0], seen
