"""Benchmark: librarian's memory while a build floods its output, as a ratio against a small flood in the
same run. Each case runs the build runner (``run_logged``, the capped ``BuildLog``) in a fresh process on a
command that writes N MiB on one line with no newline; printed: that process's peak RSS and the log's size.
Memory must not grow with N: the ratio of the largest case to the smallest stays near 1.

    .venv/bin/python benchmarks/bench_build_output.py --mib 16 256 1024
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = """
import json, os, resource, sys
from pathlib import Path
from librarian.ops.build.build_run import BuildLog, run_logged
mib, path = int(sys.argv[1]), Path(sys.argv[2])
log = BuildLog(path)
flood = f"import sys\\nfor _ in range({mib}): sys.stdout.write('x' * (1 << 20))\\nsys.stdout.flush()"
code, tail = run_logged([sys.executable, "-c", flood], dict(os.environ), log, lambda line: None)
log.close()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"code": code, "peak": peak, "log": path.stat().st_size}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, nargs="+", default=[16, 256, 1024], help="MiB of output per case")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mib in args.mib:
            done = subprocess.run([sys.executable, "-c", CASE, str(mib), str(Path(tmp) / f"{mib}.log")],
                                  cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
            rows.append((mib, json.loads(done.stdout)))
    base = rows[0][1]["peak"]
    for mib, r in rows:
        print(f"{mib:6d} MiB on one line: peak RSS {r['peak'] / 2**20:6.1f} MiB ({r['peak'] / base:.2f}x the "
              f"{rows[0][0]} MiB case), log {r['log'] / 2**20:5.1f} MiB, exit {r['code']}")  # fmt: skip
    return 0 if all(r["code"] == 0 for _, r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
