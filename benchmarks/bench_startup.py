"""Benchmark: the start-up of the commands a person runs most, whole processes, against typer's own floor
measured in the same run (issue 46, item 7): ``ls``, a local ``pull``, ``doctor --machine`` and ``--help``
each within 0.12 s of a typer app that parses the same pull command line into a command that does nothing.

Best of ``--repeat`` runs each (after one warm-up, bytecode compiled), the console script of this venv.

    .venv/bin/python benchmarks/bench_startup.py --repeat 15
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 0.12  # seconds over typer's floor
LIBRARIAN = [str(Path(sys.executable).with_name("librarian"))]


def best(argv: list[str], repeat: int, cwd: Path) -> float:
    subprocess.run(argv, capture_output=True, check=True, cwd=cwd)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, cwd=cwd)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        store = work / "store"
        wheels = sorted((ROOT / "samples" / "dist").glob("*.whl"))
        subprocess.run(
            [*LIBRARIAN, "-q", "publish", *map(str, wheels), "--torch", "2.9", "--cuda", "13.0"]
            + ["--repo", str(store), "--create"],
            check=True,
            capture_output=True,
        )
        machine = ["--sm", "90", "--torch", "2.9", "--cuda", "13.0", "--python", "3.12"]
        machine += ["--platform", "manylinux_2_28_x86_64"]
        pull = ["pull", "tinykern", "--repo", str(store), *machine, "-o", str(work / "out")]
        floor = best([sys.executable, str(ROOT / "benchmarks" / "typer_floor.py"), *pull], args.repeat, work)
        cases = {
            "librarian --help": ["--help"],
            "librarian ls": ["ls", "--repo", str(store)],
            "librarian pull (local)": ["-q", *pull],
            "librarian doctor --machine": ["doctor", "--machine", "--sm", "90", "--python", sys.executable],
        }
        print(f"{'floor: typer parsing pull':<30} {floor:6.3f} s")
        failed = 0
        for name, argv in cases.items():
            seconds = best([*LIBRARIAN, *argv], args.repeat, work)
            over = seconds - floor
            ok = over <= BUDGET
            failed += not ok
            print(
                f"{name:<30} {seconds:6.3f} s  +{over:5.3f} s over the floor  {'ok' if ok else 'OVER'} (<= {BUDGET})"
            )
        shutil.rmtree(work / "out", ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
