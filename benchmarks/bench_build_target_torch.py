"""Benchmark: ``pull --build`` into a venv that already holds the combo's torch, against a build that
installs torch into its own environment first (what ``build``, and ``pull --build`` before, did).

Both compile the sample kernel for one cell (sm80) from a fresh build cache. The baseline, in the same run,
is ``build`` (torch installed from a folder of wheels: no network, so its cost here is the install alone;
over a network add the download); the case is ``pull --build`` against the target's own torch. Printed: the
wall time of each, their ratio, the bytes of torch the baseline installed (the wheel read, the environment
grown) and the case did not. The torch is a stand-in padded with ``--pad-mb`` MiB of random bytes (a real
CUDA torch is some GB with its ``nvidia-*`` wheels), or with ``--torch-wheels DIR``, the real one: a folder
holding torch's wheel and everything it requires (``pip download torch==2.14.1 -d DIR``). Needs nvcc.

    .venv/bin/python benchmarks/bench_build_target_torch.py --pad-mb 512
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.builders import stand_in_torch, wheel_of_installed

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def padded_torch(folder: Path, pad_mb: int) -> Path:
    """The stand-in torch 2.9.0+cu130 with ``pad_mb`` MiB of random bytes in ``torch/lib`` (stored, as
    torch's libraries are incompressible in practice)."""
    stand_in_torch(folder)
    wheel = next(folder.glob("torch-*.whl"))
    with zipfile.ZipFile(wheel, "a") as zf:
        for i in range(max(pad_mb // 64, 1)):
            zf.writestr(f"torch/lib/libpad{i}.so", os.urandom(min(pad_mb, 64) << 20))
    return folder


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, check=False, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ...: exit {done.returncode}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pad-mb", type=int, default=512, help="MiB of padding in the stand-in torch")
    parser.add_argument(
        "--torch-wheels", type=Path, help="a folder with a real torch wheel and its requirements"
    )
    parser.add_argument("--torch", default="2.9", help="the torch line of --torch-wheels' torch")
    args = parser.parse_args()
    if shutil.which("nvcc") is None:
        print("bench_build_target_torch: needs nvcc on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tools = work / "tools"
        for name in ("setuptools", "wheel", "packaging"):
            wheel_of_installed(name, tools)
        torch = (
            args.torch_wheels.resolve() if args.torch_wheels else padded_torch(work / "torch", args.pad_mb)
        )
        line = args.torch if args.torch_wheels else "2.9"
        env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": f"{tools} {torch}",
               "LIBRARIAN_BUILD_INSTALLER": "pip"}  # fmt: skip
        env.pop("LIBRARIAN_TORCH_INDEX", None)
        venv = work / "target"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"torch=={line}.*"],
                       env=env, check=True)  # fmt: skip
        src = work / "src"
        shutil.copytree(ROOT / "samples" / "src", src)
        lib = [sys.executable, "-m", "librarian", "-q"]
        combo = ["--torch", line, "--cuda", "13.0"]
        baseline = timed([*lib, "build", str(src), *combo, "--python", PYTHON, "--sm", "80", "-o", "b-out"],
                         work, {**env, "LIBRARIAN_CACHE": str(work / "cache-b"), "LIBRARIAN_TORCH_INDEX": str(torch)})  # fmt: skip
        empty = work / "dist"  # a store holding another package: tinykern is a miss
        empty.mkdir()
        from tests.builders import make_wheel

        make_wheel(empty, name="otherkern", version="1.0", tags="py3-none-any")
        subprocess.run([*lib, "publish", *map(str, empty.glob("*.whl")), *combo, "--sm", "80", "--repo",
                        str(work / "store")], env=env, check=True, cwd=work, capture_output=True)  # fmt: skip
        case = timed([*lib, "pull", "tinykern", "--sm", "80", "--python", str(venv / "bin" / "python"),
                      "--repo", str(work / "store"), "--build", "--source", str(src), "-o", "c-out"],
                     work, {**env, "LIBRARIAN_CACHE": str(work / "cache-c")})  # fmt: skip
        torch_bytes = sum(p.stat().st_size for p in torch.glob("*.whl"))
        env_b, env_c = du(work / "cache-b" / "build" / "envs"), du(work / "cache-c" / "build" / "envs")
    print(f"torch wheels read by the baseline: {torch_bytes / 2**20:9.1f} MiB (the case reads none)")
    print(
        f"build environment on disk:         {env_b / 2**20:9.1f} MiB baseline, {env_c / 2**20:.1f} MiB case"
    )
    print(f"build with its own torch (baseline): {baseline:6.2f} s")
    print(f"pull --build on the target's torch:  {case:6.2f} s  ({case / baseline:.2f}x the baseline)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
