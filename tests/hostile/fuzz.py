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
    kinds: Counter[str] = field(default_factory=Counter)  # how the mutants were made, for coverage checks

    def failures(self) -> list[str]:
        """Everything that breaks the contract."""
        return [
            *self.tracebacks,
            *self.hangs,
            *self.bad_codes,
            *self.half_written,
            *self.accepted_then_rejected,
        ]

    def to_json(self) -> dict[str, object]:
        """The figures, for a report."""
        return {
            "mutants": self.mutants,
            "commands": self.commands,
            "codes": dict(self.codes),
            "tracebacks": len(self.tracebacks),
            "hangs": len(self.hangs),
            "bad_codes": len(self.bad_codes),
            "half_written": len(self.half_written),
            "accepted_then_rejected": len(self.accepted_then_rejected),
            "slowest_s": round(self.slowest, 2),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "examples": self.failures()[:5],
        }


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
    run_command(
        ["retag", str(wheel), "--torch", "2.8", "--cuda", "12.8", "-o", str(work / "out")],
        stats,
        label,
        limit,
    )
    code, _, _ = run_command(
        ["publish", str(wheel), *FLAGS, "--repo", str(store), "--create"], stats, label, limit
    )
    leftovers = (
        [p for p in store.rglob("*") if p.name.endswith(".whl") or p.name.startswith(".librarian-tmp-")]
        if store.exists()
        else []
    )
    if code != 0 and leftovers:
        stats.half_written.append(f"{label}: publish failed but left {leftovers[0].name}")
    if code == 0:
        vcode, vout, _ = run_command(["verify", "--deep", "--repo", str(store)], stats, label, limit)
        if vcode != 0:
            stats.accepted_then_rejected.append(
                f"{label}: publish accepted, verify --deep: {vout.strip().splitlines()[0:1]}"
            )


def fuzz(seed: int, count: int, workdir: Path, limit: int = 20) -> Stats:
    """``count`` mutants from ``seed``: every figure in a :class:`Stats`."""
    rng = random.Random(seed)
    stats = Stats()
    seeds = [v for v in SEEDS.values() if v]
    for i in range(count):
        data, how = mutants.mutate(rng.choice(seeds), rng)
        stats.kinds[how.split("(")[0]] += 1
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


# --- index content ---------------------------------------------------------------------------------------

HOSTILE_VALUES: tuple[object, ...] = (
    None, True, -1, 0, 1.5, 10**30, "", "x", "../x", "/abs", "sm_999", "sm_89", "12.8", "2.8", "a" * 5000,
    [], {}, [1], {"a": 1}, [[[[]]]], "evilpkg/sm89/torch2.8-cu128/evilpkg-0.1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl",
)  # fmt: skip


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, (*prefix, i))
    return found


def mutate_json(data: object, rng: random.Random) -> tuple[object, str]:
    """``data`` (parsed JSON) with one value replaced, one key dropped, or one key added; and which."""
    data = json.loads(json.dumps(data))
    path = rng.choice(_paths(data)[1:] or [()])
    if not path:
        return rng.choice(HOSTILE_VALUES), "replace"
    parent: object = data
    for step in path[:-1]:
        parent = parent[step]  # type: ignore[index]
    how = rng.random()
    if how < 0.7:
        parent[path[-1]] = rng.choice(HOSTILE_VALUES)  # type: ignore[index]
        return data, "replace"
    if how < 0.85:
        del parent[path[-1]]  # type: ignore[attr-defined]
        return data, "drop"
    if isinstance(parent, dict):
        parent[rng.choice(["extra", "facts", "cell", "size"])] = rng.choice(HOSTILE_VALUES)
        return data, "add"
    return data, "none"  # an "add" under a list: the index is left as it was


def fuzz_index(seed: int, count: int, store: Path, stats: Stats, limit: int = 20) -> None:
    """``count`` mutants of ``store``'s root and shards through verify, ls, pull and gc (the store is restored)."""
    rng = random.Random(seed)
    pristine = store.parent / f"{store.name}.pristine"
    shutil.copytree(store, pristine)
    files = {p: p.read_bytes() for p in [store / "index.json", *sorted((store / "index").glob("*.json"))]}
    commands = [
        ["verify", "--repo", str(store)],
        ["ls", "--repo", str(store)],
        [
            "pull",
            "tinykern",
            "--sm",
            "89",
            "--torch",
            "2.8",
            "--python",
            "3.11",
            "--platform",
            "linux_x86_64",
            "--repo",
            str(store),
            "-o",
            str(store.parent / "pulled"),
        ],
        ["gc", "--drop-torch", "2.4", "--yes", "--allow-empty", "--repo", str(store)],
    ]
    for i in range(count):
        target = rng.choice(sorted(files))
        mutant, how = mutate_json(json.loads(files[target]), rng)
        target.write_text(json.dumps(mutant))
        stats.mutants += 1
        stats.kinds[f"{target.name}:{how}"] += 1
        for argv in commands:
            run_command(argv, stats, f"index seed {seed} mutant {i} ({target.name})", limit)
        shutil.rmtree(store)
        shutil.copytree(pristine, store)
