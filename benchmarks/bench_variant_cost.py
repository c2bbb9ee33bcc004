"""Benchmark: what ``publish --variants`` costs in storage, against the same publish without it, in one run.

Measured, for one real wheel (``--wheel``, e.g. cupy-cuda13x from PyPI) filed under every cell its binaries
serve, and for the sample kernel's three builds of one release:

- a folder store: bytes of every file, plain vs with variants (one variant wheel per distinct build);
- the loopback Hub in the LFS shape (huggingface_hub's real client, Xet off): bytes of the LFS objects it
  holds, plain vs with variants; LFS stores each distinct sha256 once, so the cells of one build cost one
  object and its variant one more;
- Xet: what chunk-level dedup would add for the variants, estimated here, not measured (the loopback Hub
  speaks LFS only): each file is cut into content-defined chunks (a gear hash, 64 KiB average, 8 KiB to
  128 KiB, as Xet's chunker is documented to) and the bytes of the variant chunks that no stored wheel
  already holds are counted. Assumed: Xet dedups whole chunks across files of a repo, as documented; its
  real chunk boundaries and its compression of new chunks are not reproduced.

    .venv/bin/python benchmarks/bench_variant_cost.py --wheel /tmp/realuv/cupy_cuda13x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl \\
        --flags "--cuda 13.0 --torch 2.9"
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_hub_publish import client_env
from tests.loophub.server import LoopHub

MIN, AVG, MAX = 8 << 10, 64 << 10, 128 << 10
_GEAR = [int.from_bytes(hashlib.sha256(bytes([i])).digest()[:8], "little") for i in range(256)]
_MASK = (1 << (AVG.bit_length() - 1)) - 1 << (64 - (AVG.bit_length() - 1))


def chunks(data: bytes) -> list[bytes]:
    """Content-defined chunks of ``data`` (gear hash; boundaries follow content, so an insertion upstream
    shifts no boundary downstream of it)."""
    out, start, h = [], 0, 0
    n = len(data)
    i = start + MIN
    while start < n:
        h = 0
        i = min(start + MIN, n)
        end = min(start + MAX, n)
        while i < end:
            h = ((h << 1) + _GEAR[data[i]]) & 0xFFFFFFFFFFFFFFFF
            i += 1
            if not h & _MASK:
                break
        out.append(data[start:i])
        start = i
    return out


def lfs_bytes(hub_root: Path) -> int:
    return sum(p.stat().st_size for p in (hub_root / "objects" / "lfs").rglob("*") if p.is_file())


def folder_bytes(store: Path) -> int:
    """The bytes the folder store takes on disk: each file once, however many cells hard-link it."""
    seen: dict[tuple[int, int], int] = {}
    for p in store.rglob("*"):
        if p.is_file():
            st = p.stat()
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def publish(
    wheels: list[Path], flags: list[str], repo: str, env: dict[str, str], cwd: Path, variants: bool
) -> None:
    for wheel in wheels:
        cmd = [sys.executable, "-m", "librarian", "-q", "publish", str(wheel), *flags, "--repo", repo]
        cmd += ["--variants"] if variants else ["--no-variants"]
        if repo.startswith("hf://"):
            cmd += ["--create"]
        subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)


def xet_estimate(store: Path) -> tuple[int, int]:
    """(bytes of variant wheels, bytes of their chunks no stored wheel holds)."""
    known: set[bytes] = set()
    for wheel in store.rglob("*.whl"):
        if "variant-wheels" not in wheel.parts:
            known.update(hashlib.sha256(c).digest() for c in chunks(wheel.read_bytes()))
    total = new = 0
    for variant in (store / "variant-wheels").rglob("*.whl"):
        for c in chunks(variant.read_bytes()):
            total += len(c)
            digest = hashlib.sha256(c).digest()
            if digest not in known:
                new += len(c)
                known.add(digest)
    return total, new


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", action="append", type=Path, required=True)
    parser.add_argument("--flags", default="--cuda 13.0 --torch 2.9", help="publish's label flags")
    args = parser.parse_args()
    flags = shlex.split(args.flags)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for name, variants in (("plain", False), ("variants", True)):
            publish(args.wheel, flags, str(work / name), env, work, variants)
        plain, with_v = folder_bytes(work / "plain"), folder_bytes(work / "variants")
        variant_wheels = sorted((work / "variants" / "variant-wheels").rglob("*.whl"))
        cells = [p for p in (work / "variants").rglob("*.whl") if "variant-wheels" not in p.parts]
        print(f"folder: {len(cells)} filed wheel(s), {len(variant_wheels)} variant wheel(s)")
        print(
            f"folder (on disk, each hard link once): plain {plain / 1e6:.1f} MB, with variants "
            f"{with_v / 1e6:.1f} MB (x{with_v / plain:.2f})"
        )
        hub_bytes = {}
        for name, variants in (("plain", False), ("variants", True)):
            with LoopHub(work / f"hub-{name}") as hub:
                henv = {**client_env(hub.url, work / f"home-{name}"), "PYTHONPATH": str(ROOT)}
                publish(args.wheel, flags, f"hf://datasets/bench/{name}", henv, work, variants)
                hub_bytes[name] = lfs_bytes(work / f"hub-{name}")
        ratio = hub_bytes["variants"] / hub_bytes["plain"]
        print(
            f"hub (LFS, measured): plain {hub_bytes['plain'] / 1e6:.1f} MB, with variants "
            f"{hub_bytes['variants'] / 1e6:.1f} MB (x{ratio:.2f})"
        )
        total, new = xet_estimate(work / "variants")
        print(
            f"hub (Xet, estimated): the variants' {total / 1e6:.1f} MB hold {new / 1e6:.2f} MB of chunks no "
            f"stored wheel holds ({100 * new / max(total, 1):.2f}%)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
