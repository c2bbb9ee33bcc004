"""Time and memory of ``retag`` against a plain file copy, on wheels with one big ``.so``-like member.

    .venv/bin/python benchmarks/bench_retag.py                 # 128 MB and 640 MB members
    .venv/bin/python benchmarks/bench_retag.py --sizes 16,64   # quick

Each measurement runs in a fresh subprocess that reports its own wall time and peak RSS
(``ru_maxrss``), so one run's memory cannot hide another's. ``baseline`` is the same subprocess doing
nothing but importing librarian: retag's peak RSS should stay near it at every wheel size.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def _chunks(size: int, seed: int = 0) -> list[bytes]:
    """Eight distinct 1 MiB chunks like machine code: random runs between repeats, deflating to ~40%."""
    rng = random.Random(seed)
    out = []
    for _ in range(8):
        pages = []
        for _ in range(MIB // 4096):
            noise = rng.randbytes(1536)
            pages.append(noise + noise[:512] * 5)
        out.append(b"".join(pages))
    return out


def build_wheel(directory: Path, size_mb: int) -> Path:
    """A valid wheel whose ``tinykern/_big.so`` is ``size_mb`` MiB, written streaming."""
    path = directory / "tinykern-0.1.0-cp311-cp311-linux_x86_64.whl"
    dist_info = "tinykern-0.1.0.dist-info"
    record: list[str] = []

    def add(zf: zipfile.ZipFile, name: str, parts: list[bytes] | None, data: bytes = b"") -> None:
        info = zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
        h, size = hashlib.sha256(), 0
        with zf.open(info, "w", force_zip64=True) as w:
            for part in parts if parts is not None else [data]:
                w.write(part)
                h.update(part)
                size += len(part)
        digest = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{size}")

    chunks = _chunks(size_mb)
    with zipfile.ZipFile(path, "w", compresslevel=1) as zf:
        add(zf, "tinykern/__init__.py", None, b"VALUE = 1\n")
        add(zf, "tinykern/_big.so", [chunks[i % 8] for i in range(size_mb)])
        add(zf, f"{dist_info}/METADATA", None, b"Metadata-Version: 2.1\nName: tinykern\nVersion: 0.1.0\n\n")
        add(
            zf,
            f"{dist_info}/WHEEL",
            None,
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
        )
        zf.writestr(f"{dist_info}/RECORD", "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n")
    return path


def child(op: str, wheel: Path, out_dir: Path) -> None:
    """Run one operation and print its wall time and this process's peak RSS as JSON."""
    sys.path.insert(0, str(ROOT))
    from librarian.coords import Label
    from librarian.wheel.relabel import retag

    start = time.perf_counter()
    if op == "copyfile":
        shutil.copyfile(wheel, out_dir / wheel.name)
    elif op.startswith("retag"):
        retag(wheel, Label.parse("cu128torch2.8"), out_dir, verify=op == "retag-verify")
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "peak_mib": peak_kib / 1024}))


def measure(op: str, wheel: Path, out_dir: Path) -> dict[str, float]:
    for old in out_dir.iterdir():
        old.unlink()
    cmd = [sys.executable, __file__, "--child", op, str(wheel), str(out_dir)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="128,640", help="member sizes in MiB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs per operation")
    parser.add_argument("--child", nargs=3, metavar=("OP", "WHEEL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    ops = ["baseline", "copyfile", "retag-noverify", "retag-verify"]
    print(f"{'member':>8} {'wheel':>8} {'operation':<15} {'seconds':>8} {'x copy':>7} {'peak RSS':>9}")
    for size_mb in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-retag-") as tmp:
            wheel = build_wheel(Path(tmp), size_mb)
            out_dir = Path(tmp) / "out"
            out_dir.mkdir()
            best = {
                op: min((measure(op, wheel, out_dir) for _ in range(args.repeat)), key=lambda r: r["seconds"])
                for op in ops
            }
            wheel_mb = wheel.stat().st_size / MIB
            for op in ops:
                ratio = best[op]["seconds"] / best["copyfile"]["seconds"] if op != "baseline" else 0.0
                print(
                    f"{size_mb:>6}Mi {wheel_mb:>6.0f}Mi {op:<15} {best[op]['seconds']:>8.3f} "
                    f"{ratio:>6.1f}x {best[op]['peak_mib']:>6.0f}MiB"
                )


if __name__ == "__main__":
    main()
