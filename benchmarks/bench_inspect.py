"""Benchmark: ``inspect_wheel`` on a wheel with one huge ``.so``, against a plain streaming inflate.

Builds, on the fly, a wheel whose ``.so`` is a real nvcc-built library (fatbin, dynamic tables and all)
grown to ``--size`` bytes by a padding section of compressible bytes; then times, each in a fresh
subprocess, (a) reading every native member out of the zip in chunks and dropping the bytes, and
(b) ``inspect_wheel``. Reports the time ratio b/a (target <= 1.2) and each process's peak RSS.

    .venv/bin/python benchmarks/bench_inspect.py --size 1G
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import elfpad  # beside this script

ROOT = Path(__file__).resolve().parent.parent
KERNEL = '__global__ void add(float* x) { x[threadIdx.x] += 1; }\nextern "C" void go(float* x) { add<<<1,32>>>(x); }\n'
CHUNK = 1 << 20

CHILD = """
import json, resource, sys, time, zipfile
from pathlib import Path
sys.path.insert(0, {root!r})
start = time.perf_counter()
if sys.argv[1] == "inflate":
    from librarian.wheel.binaries import is_native
    with zipfile.ZipFile(sys.argv[2]) as zf:
        for info in zf.infolist():
            if is_native(info.filename):
                with zf.open(info) as m:
                    while m.read(1 << 20):
                        pass
    summary = "inflated"
else:
    from librarian.wheel.members import inspect_wheel
    facts = inspect_wheel(Path(sys.argv[2]))
    summary = [str(a) for b in facts.binaries for a in b.sass]
print(json.dumps({{"seconds": time.perf_counter() - start, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "summary": summary}}))
"""


def parse_size(text: str) -> int:
    """``1G``, ``256M``, ``4096`` -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def build_so(work: Path) -> bytes:
    """A small real CUDA ``.so`` (nvcc on PATH) with SASS for two archs and PTX."""
    (work / "k.cu").write_text(KERNEL)
    out = work / "k.so"
    subprocess.run(
        [
            "nvcc",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-cudart",
            "shared",
            "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
            "-o",
            str(out),
            "k.cu",
        ],
        cwd=work,
        check=True,
    )
    return out.read_bytes()


def padding_block(seed: int = 0) -> bytes:
    # Bytes that deflate about 3:1 like real code and tables: low-entropy runs mixed with repeats.
    # The block is larger than deflate's 32 KiB window, so repeating it does not compress better.
    rng = random.Random(seed)
    block = bytearray()
    while len(block) < CHUNK:
        block += bytes(rng.choices(range(16), k=2048)) + bytes(rng.randrange(256) for _ in range(8)) * 64
    return bytes(block[:CHUNK])


def write_wheel(so: bytes, size: int, path: Path) -> None:
    """The wheel: ``so`` with a ``.lbench_pad`` section appended and its section headers moved after it."""
    pad_size = max(size - elfpad.header_overhead(so), CHUNK)
    head, tail = elfpad.grow(so, pad_size)
    block = padding_block()
    info = zipfile.ZipInfo("bench/_C.so", date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("bench/__init__.py", b"")
        with zf.open(info, "w", force_zip64=True) as out:
            out.write(head)
            left = pad_size
            while left:
                out.write(block[: min(left, CHUNK)])
                left -= min(left, CHUNK)
            out.write(tail)
        zf.writestr("bench-1.0.dist-info/RECORD", b"")


def run_child(mode: str, wheel: Path) -> dict[str, object]:
    """Run one measurement in a fresh interpreter, so each peak RSS is its own."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), mode, str(wheel)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    """Build the wheel, time both readers (best of ``--repeat``), print the ratio and peak memory."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="1G", help="size of the .so member (default 1G)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reader; the best counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        wheel = work / "bench-1.0-cp312-cp312-linux_x86_64.whl"
        write_wheel(build_so(work), parse_size(args.size), wheel)
        print(
            f"built {wheel.name}: {wheel.stat().st_size / 2**20:.0f} MiB zipped, "
            f"{parse_size(args.size) / 2**20:.0f} MiB .so, in {time.perf_counter() - start:.1f} s"
        )
        base = min((run_child("inflate", wheel) for _ in range(args.repeat)), key=lambda r: r["seconds"])  # type: ignore[arg-type, return-value]
        ours = min((run_child("inspect", wheel) for _ in range(args.repeat)), key=lambda r: r["seconds"])  # type: ignore[arg-type, return-value]
    print(f"plain inflate : {base['seconds']:.2f} s, peak RSS {int(base['rss_kib']) // 1024} MiB")  # type: ignore[call-overload]
    print(
        f"inspect_wheel : {ours['seconds']:.2f} s, peak RSS {int(ours['rss_kib']) // 1024} MiB, "  # type: ignore[call-overload]
        f"sass {ours['summary']}"
    )
    print(f"ratio         : {float(ours['seconds']) / float(base['seconds']):.2f} (target <= 1.2)")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
