"""Benchmark: ``doctor --env`` of an environment against ``doctor --machine`` (start-up and the probes) and
against reading every native library of the environment once (the baseline of a reader that reads whole
files), all in the same run, whole processes, warm file cache (each run once before it is timed).

    .venv/bin/python benchmarks/bench_doctor_env.py --python /path/to/venv/bin/python --repeat 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from librarian.probe.installed import read_installed, site_dirs
from librarian.probe.target import Target, probe_target

LIB = [sys.executable, "-m", "librarian", "-q", "doctor"]


def best(argv: list[str], repeat: int) -> tuple[float, int]:
    """The best wall time of ``repeat`` runs (after one warm-up) and the peak RSS (KB) of the last."""
    subprocess.run(argv, capture_output=True, check=False)
    times, rss = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True, check=False
        )
        times.append(time.perf_counter() - start)
        rss = int(done.stderr.strip().splitlines()[-1])
    return min(times), rss


def read_all(files: list[Path]) -> int:
    total = 0
    for f in files:
        with f.open("rb") as h:
            while chunk := h.read(1 << 24):
                total += len(chunk)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the environment's interpreter")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sm", default="90")
    args = parser.parse_args()
    sites = site_dirs(probe_target(Target(Path(args.python), "the target")).path)
    files = [d.site / m for d in read_installed(sites) for m in d.native]
    machine, machine_rss = best([*LIB, "--machine", "--python", args.python, "--sm", args.sm], args.repeat)
    env, env_rss = best(
        [*LIB, "--env", "--python", args.python, "--sm", args.sm, "--driver", "13.0"], args.repeat
    )
    read_all(files)
    start = time.perf_counter()
    size = read_all(files)
    whole = time.perf_counter() - start
    print(f"{len(files)} native files, {size / 2**20:.0f} MiB")
    print(f"doctor --machine:               {machine:6.2f} s  {machine_rss / 1024:6.0f} MB")
    print(f"doctor --env:                   {env:6.2f} s  {env_rss / 1024:6.0f} MB  (+{env - machine:.2f} s)")
    print(f"every native file read once:    {whole:6.2f} s  (doctor --env is {env / whole:.2f}x that)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
