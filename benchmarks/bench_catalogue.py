"""What a big store's generated files and gc plan cost, against another revision in the same run.

The pip pages ask the judgement which other combos a wheel's bytes serve, and gc asks it before it calls a
torch line stale: this measures both on 100,000 synthetic index entries (the shape of ``make_big_store.py``)
for this checkout and for ``--base REV`` (a git worktree), each in a fresh interpreter, and prints the ratio.

    .venv/bin/python benchmarks/bench_catalogue.py --base 8928d2c --repeat 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORK = r"""
import itertools, sys, time
sys.path.insert(0, sys.argv[1])
from librarian.catalogue import render_catalogue
from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label
from librarian.index import Index, IndexEntry
from librarian.ops.store.gc import plan_gc
from librarian.ops.store.gc_policy import GcPolicy
layout = load_layout()
SMS = ("80", "86", "89", "90", "120")
COMBOS = ((12, 8, 2, 8), (12, 6, 2, 8), (12, 8, 2, 7), (13, 0, 2, 9))
PYTHONS = ("cp310", "cp311", "cp312", "cp313")
entries, i = [], 0
for p in range(250):
    for v, sm, (cm, cn, tm, tn), py in itertools.product(range(5), SMS, COMBOS, PYTHONS):
        label = Label((cm, cn), (tm, tn))
        cell = Cell(f"pkg{p:05d}", GpuArch.parse(sm), label)
        name = f"pkg{p:05d}-1.{v}+{label}-{py}-{py}-linux_x86_64.whl"
        entries.append(IndexEntry(layout.path_for(cell, name), f"{i:064x}", 50_000 + i, cell, "2025-01-01T00:00:00Z"))
        i += 1
index = Index(layout, tuple(sorted(entries, key=lambda e: e.path)))
t = time.perf_counter(); render_catalogue(index); render = time.perf_counter() - t
t = time.perf_counter(); plan_gc(index, GcPolicy(keep_torch=1)); gc = time.perf_counter() - t
print(render, gc)
"""


def measure(code: Path, repeat: int) -> tuple[float, float]:
    """The best of ``repeat`` runs of (render_catalogue, plan_gc) seconds for the checkout at ``code``."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", WORK, str(code)], capture_output=True, text=True, check=True
        )
        render, gc = (float(x) for x in out.stdout.split())
        runs.append((render, gc))
    return min(r for r, _ in runs), min(g for _, g in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--base", default="HEAD~1", help="the revision to compare with (a git worktree is made)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.base], check=True
        )
        try:
            before = measure(base, args.repeat)
            after = measure(ROOT, args.repeat)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    for what, b, a in (
        ("render_catalogue", before[0], after[0]),
        ("plan_gc --keep-torch 1", before[1], after[1]),
    ):
        print(
            f"{what:24} 100,000 entries: {args.base} {b:6.2f} s, this checkout {a:6.2f} s, ratio {a / b:.2f}x"
        )


if __name__ == "__main__":
    main()
