"""Build a synthetic many-member wheel: ``--count`` nvcc cubins as loose members, for ``bench_inflate.py
--all``. The default is flashinfer-cubin 0.6.13's shape: 16,000 members, nearly all ``.cubin`` files of
about 80 to 130 KB (its median is 117 KB); ``--tiny`` makes them 3 to 5 KB, where the cost per member,
not the inflate, is all there is.

    .venv/bin/python benchmarks/many_cubins.py /tmp/many --count 16000
    .venv/bin/python benchmarks/bench_inflate.py /tmp/many/manykern-*.whl --all
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.builders import make_wheel

ARCHS = ("80", "86", "89", "90", "100", "120")
KERNEL = """
template <int N> __global__ void k(float* x, const float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = {v}.0f;
    #pragma unroll
    for (int j = 0; j < N; ++j) {{ acc = acc * y[(i + j) % n] + __sinf(x[(i * 7 + j) % n]); }}
    x[i % n] = acc;
}}
template __global__ void k<{n}>(float*, const float*, int);
"""


def cubins(work: Path, variants: int, tiny: bool) -> list[tuple[str, bytes]]:
    """``variants`` kernels x the archs, compiled to cubins by nvcc: (name, bytes)."""
    out = []
    for v in range(variants):
        src = work / f"k{v}.cu"
        src.write_text(KERNEL.format(v=v + 1, n=(2 + v) if tiny else 150 + 30 * v))
        for arch in ARCHS:
            cubin = work / f"k{v}_sm{arch}.cubin"
            subprocess.run(["nvcc", "-cubin", f"-arch=sm_{arch}", "-o", str(cubin), str(src)], check=True)
            out.append((f"k{v}_sm{arch}", cubin.read_bytes()))
    return out


def build(out: Path, count: int, variants: int = 4, tiny: bool = False) -> Path:
    """The wheel: ``count`` cubin members cycling over the compiled ones, under distinct names."""
    with tempfile.TemporaryDirectory() as tmp:
        compiled = cubins(Path(tmp), variants, tiny)
    files = {"manykern/__init__.py": b""}
    for i in range(count):
        name, data = compiled[i % len(compiled)]
        files[f"manykern/cubins/{i // 100:03d}/{name}_{i}.cubin"] = data
    return make_wheel(out, "manykern", "0.1.0", "py3-none-manylinux_2_28_x86_64", files)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=16_000)
    parser.add_argument(
        "--tiny", action="store_true", help="cubins of 3 to 5 KB instead of flashinfer's ~100 KB"
    )
    args = parser.parse_args()
    print(build(args.out, args.count, tiny=args.tiny))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
