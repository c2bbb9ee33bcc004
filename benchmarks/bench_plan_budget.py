"""plan --budget: a plan of at least 1,000 missing cells packed into jobs under a budget, against the same
plan unpacked (the baseline, in the same run); every packed job's estimate is checked to be within it.

    .venv/bin/python benchmarks/bench_plan_budget.py --cells 1000 --budget 1h --repeat 5

Prints the cells, the jobs before and after packing, the best wall time of each and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from librarian.config import load_layout
from librarian.gpus import parse_real_sm
from librarian.index import Index
from librarian.ops.grid.plan import History, Plan, Spec, make_plan, wanted_cells
from librarian.ops.grid.plan_budget import parse_budget
from librarian.pytorch.matrix import Selection, load_matrix

GPUS = ("75", "80", "86", "89", "90", "100", "120")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--budget", default="1h")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    matrix = load_matrix()
    sel = Selection.parse(platform=("linux-x86_64", "linux-aarch64", "windows-amd64"), newest=3)
    sms = [parse_real_sm(s) for s in GPUS]
    per_spec = len(wanted_cells(matrix, sel, [Spec.parse("p0==1.0")], sms)[0])
    specs = [Spec.parse(f"p{i}==1.0") for i in range(-(-args.cells // max(per_spec, 1)))]
    index = Index(load_layout())
    budget = parse_budget(args.budget)

    def timed(history: History) -> tuple[float, Plan]:
        best, result = float("inf"), None
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = make_plan(index, matrix, sel, specs, sms, location="bench", history=history)
            best = min(best, time.perf_counter() - started)
        assert result is not None
        return best, result

    base_time, base = timed(History())
    packed_time, packed = timed(History(budget=budget))
    cells = sum(len(j.sms) for j in base.jobs)
    over = [e.seconds for e in packed.estimates if e.seconds > budget]
    print(f"{cells} missing cells of {len(specs)} spec(s); budget {budget} s")
    print(f"unpacked: {len(base.jobs)} jobs, best of {args.repeat}: {base_time:.3f} s")
    print(f"packed:   {len(packed.jobs)} jobs, best of {args.repeat}: {packed_time:.3f} s "
          f"(x{packed_time / base_time:.2f} of unpacked); jobs past the budget: {len(over)}")  # fmt: skip
    return 1 if over or cells < args.cells else 0


if __name__ == "__main__":
    sys.exit(main())
