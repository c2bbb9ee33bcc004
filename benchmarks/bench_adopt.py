"""Benchmark: ``reindex --adopt`` of N hand-filed wheels against ``publish`` of the same N, in one run.

Each wheel is distinct: the sample kernel's real ``.so`` (SASS for sm_80-sm_90, PTX) and a payload of
``--size`` MB of random bytes, stored, so the bytes cost what they weigh. Measured, whole processes (the
console script, as people run it), wall time and peak RSS:

- a folder: ``publish dist/*.whl`` into an empty store, against ``reindex --adopt`` of a folder where the
  same wheels were filed by hand (unlabelled, ``tinykern/sm89/torch2.9-cu130/``);
- the loopback Hub (huggingface_hub's real client, LFS): ``publish`` into a new dataset, against
  ``reindex --adopt`` of a dataset where the same wheels were committed by hand (not timed); the bytes each
  sends to the Hub and reads from it, and its commits; then a second adoption of the same dataset (what a
  rerun after an interruption reads);
- adoption's peak memory at ``--size`` and at four times it: flat, since a wheel is streamed, never held.

    .venv/bin/python benchmarks/bench_adopt.py --wheels 40 --size 8
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# This process commits the hand-made dataset: huggingface_hub reads these at import.
os.environ.update(
    {"HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
)

from benchmarks.bench_hub_publish import client_env
from tests.builders import make_wheel
from tests.loophub.server import LoopHub

LIB = [str(Path(sys.executable).with_name("librarian")), "-q"]
CELL = "tinykern/sm89/torch2.9-cu130"


def wheels(folder: Path, count: int, size: int, seed: int = 0) -> list[Path]:
    """``count`` distinct tinykern wheels, each the sample's .so and ``size`` random bytes."""
    sample = ROOT / "samples/dist/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(sample) as zf:
        so = zf.read("tinykern/_tinykern.so")
    rng = random.Random(seed)
    made = []
    for k in range(count):
        files = {
            "tinykern/__init__.py": b"X = 1\n",
            "tinykern/_tinykern.so": so,
            "tinykern/payload.bin": rng.randbytes(size),
        }
        made.append(make_wheel(folder, "tinykern", f"0.1.{k}", "cp312-cp312-linux_x86_64", files,
                               compression=zipfile.ZIP_STORED))  # fmt: skip
    return made


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (KB) and exit status of one run."""
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *argv], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    return seconds, int(done.stderr.strip().splitlines()[-1]), done.returncode


def hand_filed(dist: list[Path], root: Path) -> None:
    (root / CELL).mkdir(parents=True)
    for wheel in dist:
        shutil.copyfile(wheel, root / CELL / wheel.name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=int, default=40)
    parser.add_argument("--size", type=float, default=8.0, help="MB of payload per wheel")
    args = parser.parse_args()
    size = int(args.size * (1 << 20))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        dist = wheels(work / "dist", args.wheels, size)
        env = {**os.environ, "LIBRARIAN_CACHE": str(work / "cache-local"), "PYTHONPATH": str(ROOT)}
        total = sum(p.stat().st_size for p in dist) / 1e6
        print(f"{args.wheels} wheels, {total:.0f} MB")
        pub = timed(
            [*LIB, "publish", *map(str, dist), "--torch", "2.9", "--cuda", "13.0", "--repo", "pub"], env, work
        )
        hand_filed(dist, work / "hand")
        adopt = timed([*LIB, "reindex", "--adopt", "--repo", "hand"], env, work)
        failures += pub[2] != 0 or adopt[2] != 0
        print(f"folder  publish   {pub[0]:6.2f} s  {pub[1] / 1024:5.0f} MB")
        print(
            f"folder  adopt     {adopt[0]:6.2f} s  {adopt[1] / 1024:5.0f} MB   adopt/publish {adopt[0] / pub[0]:.2f}"
        )

        with LoopHub(work / "hub") as hub:
            henv = {**client_env(hub.url, work / "home"), "LIBRARIAN_CACHE": str(work / "cache-hub")}
            hub.log.clear()
            hpub = timed([*LIB, "publish", *map(str, dist), "--torch", "2.9", "--cuda", "13.0", "--create",
                          "--repo", "hf://datasets/bench/pub"], henv, work)  # fmt: skip
            sent_pub = sum(r.bytes_received for r in hub.log.records)
            from huggingface_hub import CommitOperationAdd, HfApi

            api = HfApi(endpoint=hub.url)
            api.create_repo("bench/hand", repo_type="dataset")
            ops = [CommitOperationAdd(f"{CELL}/{p.name}", str(p)) for p in dist]
            api.create_commit("bench/hand", ops, commit_message="by hand", repo_type="dataset")
            before = hub.commits_made("bench/hand")
            hub.log.clear()
            hadopt = timed([*LIB, "reindex", "--adopt", "--repo", "hf://datasets/bench/hand"], henv, work)
            sent = sum(r.bytes_received for r in hub.log.records)
            read = sum(r.bytes_sent for r in hub.log.select("resolve", "GET"))
            commits = hub.commits_made("bench/hand") - before
            hub.log.clear()
            # a rerun of the same adoption (after an interruption: nothing committed) reads no wheel again
            shutil.rmtree(work / "home" / "hub", ignore_errors=True)
            api.create_repo("bench/hand2", repo_type="dataset")
            ops = [CommitOperationAdd(f"{CELL}/{p.name}", str(p)) for p in dist]
            api.create_commit("bench/hand2", ops, commit_message="by hand", repo_type="dataset")
            hub.log.clear()
            again = timed([*LIB, "reindex", "--adopt", "--repo", "hf://datasets/bench/hand2"], henv, work)
            reread = sum(
                r.bytes_sent for r in hub.log.select("resolve", "GET") if (r.path or "").endswith(".whl")
            )
        failures += hpub[2] != 0 or hadopt[2] != 0 or again[2] != 0
        print(f"hub     publish   {hpub[0]:6.2f} s  {hpub[1] / 1024:5.0f} MB   sent {sent_pub / 1e6:7.1f} MB")
        print(
            f"hub     adopt     {hadopt[0]:6.2f} s  {hadopt[1] / 1024:5.0f} MB   sent {sent / 1e6:7.1f} MB, read "
            f"{read / 1e6:.1f} MB, {commits} commit(s)   adopt/publish {hadopt[0] / hpub[0]:.2f}"
        )
        print(
            f"hub     again     {again[0]:6.2f} s  {again[1] / 1024:5.0f} MB   wheels read again {reread / 1e6:.1f} MB"
        )

        big = wheels(work / "big", args.wheels, size * 4, seed=1)
        hand_filed(big, work / "hand-big")
        large = timed([*LIB, "reindex", "--adopt", "--repo", "hand-big"], env, work)
        failures += large[2] != 0
        print(f"memory  adopt at {args.size:g} MB/wheel {adopt[1] / 1024:.0f} MB, at {4 * args.size:g} MB/wheel "
              f"{large[1] / 1024:.0f} MB (x{large[1] / adopt[1]:.2f})")  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
