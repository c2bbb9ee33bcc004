"""Seeded fuzzing: mutants of a good wheel through inspect, retag, publish and verify, in-process.

Each mutant must end every command with exit 0, 1 or 2 and no traceback, within the time limit; a
failed publish must leave no wheel and no temp file in the store, and a wheel publish accepts must pass
``verify --deep``. Run it alone (a worker process, whose peak RSS is its own) with::

    python -m tests.hostile.fuzz --seed 1 --count 10000 --workdir /tmp/fuzz
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import resource
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from librarian.cli import main
from tests.hostile import mutants

WHEEL = f"tinykern-0.1.0-{mutants.TAGS}.whl"
FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8")
# A real-looking ELF .so with a fatbinary would be better bait; a small ELF header keeps mutants cheap.
SEEDS = {
    "pure": mutants.good_wheel_bytes(),
    "native": mutants.good_wheel_bytes(extra={"tinykern/_k.so": b"\x7fELF\x02\x01\x01" + bytes(57)}),
}


class Hang(Exception):
    """A command ran past the time limit."""


@dataclass
class Stats:
    """What a fuzz run saw."""

    mutants: int = 0
    commands: int = 0
    codes: Counter[int] = field(default_factory=Counter)
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    bad_codes: list[str] = field(default_factory=list)
    half_written: list[str] = field(default_factory=list)
    accepted_then_rejected: list[str] = field(default_factory=list)
    slowest: float = 0.0
    peak_rss_mb: float = 0.0

    def failures(self) -> list[str]:
        """Everything that breaks the contract."""
        return [*self.tracebacks, *self.hangs, *self.bad_codes, *self.half_written, *self.accepted_then_rejected]

    def to_json(self) -> dict[str, object]:
        """The figures, for a report."""
        return {
            "mutants": self.mutants, "commands": self.commands, "codes": dict(self.codes),
            "tracebacks": len(self.tracebacks), "hangs": len(self.hangs), "bad_codes": len(self.bad_codes),
            "half_written": len(self.half_written), "accepted_then_rejected": len(self.accepted_then_rejected),
            "slowest_s": round(self.slowest, 2), "peak_rss_mb": round(self.peak_rss_mb, 1),
            "examples": self.failures()[:5],
        }  # fmt: skip


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang


@contextlib.contextmanager
def _limit(seconds: int) -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_command(argv: list[str], stats: Stats, label: str, limit: int) -> tuple[int, str, str]:
    """``librarian ARGV`` in-process: its exit code, stdout and stderr; contract breaches go to ``stats``."""
    out, err = io.StringIO(), io.StringIO()
    code = -1
    start = time.perf_counter()
    stats.commands += 1
    try:
        with _limit(limit), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0) if not isinstance(e.code, str) else 2
    except Hang:
        stats.hangs.append(f"{label}: {argv[0]} ran past {limit} s")
    except BaseException:  # noqa: BLE001 - a traceback is exactly what the fuzzer looks for
        stats.tracebacks.append(f"{label}: {argv[0]}: {traceback.format_exc().strip().splitlines()[-1]}")
    stats.slowest = max(stats.slowest, time.perf_counter() - start)
    stats.codes[code] += 1
    text = err.getvalue()
    if code in (1, 2) and "librarian: error:" in text and text.count("librarian: error:") != 1:
        stats.bad_codes.append(f"{label}: {argv[0]}: more than one error line")
    if code not in (0, 1, 2) and code != -1:
        stats.bad_codes.append(f"{label}: {argv[0]} exited {code}")
    if "Traceback" in text:
        stats.tracebacks.append(f"{label}: {argv[0]}: traceback on stderr")
    return code, out.getvalue(), text


def check_mutant(data: bytes, work: Path, stats: Stats, label: str, limit: int = 20) -> None:
    """One mutant through inspect, retag, publish and (if published) verify --deep."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    wheel = work / WHEEL
    wheel.write_bytes(data)
    store = work / "S"
    run_command(["inspect", str(wheel)], stats, label, limit)
    run_command(["retag", str(wheel), "--torch", "2.8", "--cuda", "12.8", "-o", str(work / "out")], stats, label, limit)
    code, _, _ = run_command(["publish", str(wheel), *FLAGS, "--repo", str(store), "--create"], stats, label, limit)
    leftovers = [p for p in store.rglob("*") if p.name.endswith(".whl") or p.name.startswith(".librarian-tmp-")] if store.exists() else []
    if code != 0 and leftovers:
        stats.half_written.append(f"{label}: publish failed but left {leftovers[0].name}")
    if code == 0:
        vcode, vout, _ = run_command(["verify", "--deep", "--repo", str(store)], stats, label, limit)
        if vcode != 0:
            stats.accepted_then_rejected.append(f"{label}: publish accepted, verify --deep: {vout.strip().splitlines()[0:1]}")


def fuzz(seed: int, count: int, workdir: Path, limit: int = 20) -> Stats:
    """``count`` mutants from ``seed``: every figure in a :class:`Stats`."""
    rng = random.Random(seed)
    stats = Stats()
    seeds = [v for v in SEEDS.values() if v]
    for i in range(count):
        data, how = mutants.mutate(rng.choice(seeds), rng)
        if rng.random() < 0.3:  # stack a second mutation now and then
            data, how2 = mutants.mutate(data, rng) if data else (data, "")
            how = f"{how}+{how2}"
        stats.mutants += 1
        check_mutant(data, workdir / "m", stats, f"seed {seed} mutant {i} ({how})", limit)
    stats.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return stats


def _main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=20)
    args = parser.parse_args()
    stats = fuzz(args.seed, args.count, args.workdir, args.limit)
    sys.stdout.write(json.dumps(stats.to_json()) + "\n")


if __name__ == "__main__":
    _main()
