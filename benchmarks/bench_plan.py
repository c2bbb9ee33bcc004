"""Benchmark: ``librarian plan`` on a local store of 100,000 index entries, against ``librarian pull``.

Both read the root index and one package's shard; plan then judges every wanted cell (here 5 GPUs x the
newest torch lines x their CUDA lines x the combo's Pythons). Each is run as a user runs it, a fresh
process, best of ``--repeat``; the ratio is plan over pull in the same run (pull is the baseline: one
resolution). The store is ``make_big_store.py``'s local one (built first into a temp dir, or ``--local``).

    .venv/bin/python benchmarks/bench_plan.py --local /tmp/big-local
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import make_big_store as big

LIBRARIAN = [sys.executable, "-m", "librarian"]
SMS = ("--sm", "80", "--sm", "86", "--sm", "89", "--sm", "90", "--sm", "120")


def best(argv: list[str], repeat: int) -> float:
    """The best wall time of ``repeat`` runs of ``argv`` (each must exit 0)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--local", type=Path, default=None, help="make_big_store.py's local store (else built now)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        local = args.local
        if local is None:
            local = Path(tmp) / "local"
            big.main(["--root", str(Path(tmp) / "hub"), "--local", str(local)])
        repo = ("--repo", str(local))
        out = Path(tmp) / "out"
        pull = [
            *LIBRARIAN,
            "pull",
            big.PULLED,
            *repo,
            "--sm",
            "89",
            "--torch",
            "2.8",
            "--cuda",
            "12.8",
            "--python",
            "3.11",
            "--platform",
            "linux_x86_64",
            "-o",
            str(out),
        ]
        plans = {
            "plan, 1 torch line (40 cells)": [
                *LIBRARIAN,
                "plan",
                f"{big.PULLED}==1.0",
                *repo,
                *SMS,
                "--torch",
                "2.8",
                "--json",
            ],
            "plan, 3 torch lines (230 cells)": [
                *LIBRARIAN,
                "plan",
                f"{big.PULLED}==1.0",
                *repo,
                *SMS,
                "--torch",
                "2.7",
                "--torch",
                "2.8",
                "--torch",
                "2.9",
                "--json",
            ],
        }
        base = best(pull, args.repeat)
        print(f"{'pull, one package (baseline)':34} {base:6.3f} s")
        for what, argv in plans.items():
            took = best(argv, args.repeat)
            print(f"{what:34} {took:6.3f} s  ratio {took / base:.2f}x pull")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
