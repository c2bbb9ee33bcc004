"""Benchmark: what ``librarian build`` adds around the compile itself, on the sample kernel, cold and warm.

The baseline, in the same run, is the compile alone: ``pip wheel --no-build-isolation --no-deps`` of the
same source in the build environment build made (what a hand-written build job runs). ``build`` adds: the
environment (made on the first run, reused after), torch's install and check, the build tools, nvcc's check,
then publish's read, judgement and filing of the wheel. Offline: a stand-in torch wheel and the build
tools from this environment, as the tests do (``tests/builders.py``). Needs nvcc.

    .venv/bin/python benchmarks/bench_build.py --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.builders import stand_in_torch, wheel_of_installed

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="warm runs (best of), and baseline runs")
    args = parser.parse_args()
    if shutil.which("nvcc") is None:
        print("bench_build: needs nvcc on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = work / "src"
        shutil.copytree(ROOT / "samples" / "src", src)
        tools = work / "tools"
        for name in ("setuptools", "wheel", "packaging"):
            wheel_of_installed(name, tools)
        env = {
            **os.environ,
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(tools),
            "LIBRARIAN_CACHE": str(work / "cache"),
            "LIBRARIAN_TORCH_INDEX": str(stand_in_torch(work / "torch")),
            "LIBRARIAN_BUILD_INSTALLER": "pip",
        }
        build = [
            sys.executable,
            "-m",
            "librarian",
            "-q",
            "build",
            str(src),
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
        ]
        build += ["--python", PYTHON, "--sm", "80", "--sm", "89"]
        cold = timed([*build, "--repo", str(work / "store0")], work, env)
        warm = min(
            timed([*build, "--repo", str(work / f"store{i + 1}")], work, env) for i in range(args.repeat)
        )
        envs = list((work / "cache" / "build" / "envs").iterdir())
        python = envs[0] / "bin" / "python"
        compile_env = {**env, "TORCH_CUDA_ARCH_LIST": "8.0;8.9"}
        bare = [str(python), "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w"]
        baseline = min(
            timed([*bare, str(work / f"w{i}"), str(src)], work, compile_env) for i in range(args.repeat)
        )
    print(f"compile alone (pip wheel, best of {args.repeat}): {baseline:6.2f} s")
    print(
        f"build, first run (makes the environment):   {cold:6.2f} s  adds {cold - baseline:5.2f} s  ({cold / baseline:.2f}x)"
    )
    print(
        f"build, warm (best of {args.repeat}):                {warm:6.2f} s  adds {warm - baseline:5.2f} s  ({warm / baseline:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
