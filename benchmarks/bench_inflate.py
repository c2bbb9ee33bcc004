"""Benchmark: inspect a real wheel against the floor, one single-threaded stdlib inflate of its members.

In one run, each in a fresh process, best of ``--repeat``:

- the floor: every native member (``.so``/``.pyd``/...; ``--all`` for every member) inflated with the
  stdlib's ``zlib``, one thread, bytes dropped;
- the same inflate with each engine installed (ISA-L ``isal``, ``zlib-ng``), for reference;
- ``librarian inspect`` of the wheel through each engine (``LIBRARIAN_INFLATE``), its peak RSS against a
  bare start-up of the same interpreter (the ``import librarian`` process);
- with ``--retag``, a verified retag through each engine, against the floor plus a sha256 pass.

    .venv/bin/python benchmarks/bench_inflate.py cupy_cuda12x-14.2.0-cp312-cp312-manylinux2014_x86_64.whl
    .venv/bin/python benchmarks/bench_inflate.py flashinfer_cubin-*.whl --all   # a many-member wheel
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import hashlib, json, resource, sys, time, zipfile
sys.path.insert(0, sys.argv[1])
what, wheel, every = sys.argv[2], sys.argv[3], sys.argv[4] == "all"
start = time.perf_counter()
if what.startswith("inflate:"):
    import importlib
    module = importlib.import_module({"zlib": "zlib", "isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng"}[what[8:]])
    from librarian.wheel.binaries import is_native
    sha = "sha" in sys.argv[5:]
    with open(wheel, "rb") as f, zipfile.ZipFile(f) as zf:
        for info in zf.infolist():
            if not (every or is_native(info.filename)) or info.compress_type != zipfile.ZIP_DEFLATED:
                continue
            f.seek(info.header_offset + 26)
            n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
            f.seek(info.header_offset + 30 + n + m)
            raw, d, left = info.compress_size, module.decompressobj(-15), info.compress_size
            h = hashlib.sha256() if sha else None
            while left:
                chunk = f.read(min(left, 1 << 20)); left -= len(chunk)
                out = d.decompress(chunk)
                if h: h.update(out)
    if sha:
        with open(wheel, "rb") as f:
            h = hashlib.sha256()
            while b := f.read(1 << 20): h.update(b)
elif what == "startup":
    import librarian
elif what == "startup-cli":
    import librarian.cli, librarian.ops.inspect
elif what == "inspect":
    from pathlib import Path
    from librarian.wheel.members import inspect_wheel
    inspect_wheel(Path(wheel))
elif what == "cli":
    import contextlib, io
    from librarian.cli import main
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["inspect", wheel])
        except SystemExit:
            pass
elif what == "retag":
    import tempfile
    from pathlib import Path
    from librarian.coords import Label
    from librarian.wheel.relabel import retag_with_directory
    with tempfile.TemporaryDirectory() as tmp:
        # as `librarian retag` does it: RECORD checked and binaries read, no sha256 of the new wheel
        retag_with_directory(Path(wheel), Label.parse("cu128torch2.9"), Path(tmp), relabel=True, digest=False)
print(json.dumps({"s": time.perf_counter() - start, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def measure(
    what: str, wheel: Path, every: bool, repeat: int, engine: str | None = None, *extra: str
) -> tuple[float, int]:
    env = {**os.environ}
    if engine:
        env["LIBRARIAN_INFLATE"] = engine
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(ROOT), what, str(wheel), "all" if every else "native", *extra],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        runs.append(json.loads(out.stdout))
    best = min(runs, key=lambda r: r["s"])
    return best["s"], max(r["rss"] for r in runs)


def installed(engine: str) -> bool:
    module = {"zlib": "zlib", "isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng"}[engine]
    return (
        subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, check=False
        ).returncode
        == 0
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("wheel", type=Path)
    parser.add_argument(
        "--all", action="store_true", help="the floor inflates every member, not only native ones"
    )
    parser.add_argument("--retag", action="store_true", help="also a verified retag against inflate + sha256")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines = [e for e in ("isal", "zlib-ng", "zlib") if installed(e)]
    floor, _ = measure("inflate:zlib", args.wheel, args.all, args.repeat)
    _, start_rss = measure("startup", args.wheel, args.all, 1)
    print(
        f"{args.wheel.name}: floor (stdlib zlib, one thread) {floor:.2f} s; bare start-up {start_rss / 1024:.0f} MB"
    )
    for engine in engines:
        took, _ = measure(f"inflate:{engine}", args.wheel, args.all, args.repeat)
        print(f"  inflate, {engine:8} {took:6.2f} s  {took / floor:.2f}x")
    for engine in engines:
        took, rss = measure("inspect", args.wheel, args.all, args.repeat, engine)
        print(
            f"  inspect, {engine:8} {took:6.2f} s  {took / floor:.2f}x  peak {rss / 1024:.0f} MB "
            f"(+{(rss - start_rss) / 1024:.0f} MB)"
        )
    with zipfile.ZipFile(args.wheel) as zf:
        members = len(zf.infolist())
    for engine in engines[:1]:
        took, rss = measure("cli", args.wheel, args.all, args.repeat, engine)
        start, _ = measure("startup-cli", args.wheel, args.all, args.repeat, engine)
        print(
            f"  librarian inspect (the command, judgement and report included), {engine}: {took:.2f} s  "
            f"{took / floor:.2f}x  peak {rss / 1024:.0f} MB"
        )
        # what each member costs above the floor's own per-member work, start-up (imports) taken out
        print(
            f"  per member: floor {floor / members * 1e6:.0f} us, inspect {(took - start) / members * 1e6:.0f} us "
            f"over {members} members (the command's imports, {start:.2f} s, apart)"
        )
    if args.retag:
        sha_floor, _ = measure("inflate:zlib", args.wheel, args.all, args.repeat, None, "sha")
        print(f"  floor + sha256 {sha_floor:.2f} s")
        for engine in engines:
            took, rss = measure("retag", args.wheel, args.all, args.repeat, engine)
            print(f"  retag,   {engine:8} {took:6.2f} s  {took / sha_floor:.2f}x  peak {rss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
