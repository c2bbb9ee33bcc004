"""Benchmark: resolve and pull one package from a store of 100,000 index entries (Hub and local).

Starts a loophub on 127.0.0.1 over a store made by ``make_big_store.py`` (built first into a temp dir,
or reused with ``--root``), then for ``PULLED``:

- in this process, with a cold client cache: read the index (root + one shard), resolve, fetch; the
  loophub's request log must show exactly ``index.json``, the package's shard and the wheel downloaded;
- ``librarian pull`` as a user runs it (a fresh process, cold cache), wall time;
- the same two on a local store directory holding the same files.

    .venv/bin/python benchmarks/bench_pull_index.py                       # builds 100,000 entries first
    .venv/bin/python benchmarks/bench_pull_index.py --root /tmp/big-hub   # reuse make_big_store's output
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import make_big_store as big

REPO = f"hf://datasets/{big.REPO_ID}"
PULL = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--python", "3.11", "--platform", "linux_x86_64")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(
    store_name: str, make_store: object, cache: Path | None, repeat: int
) -> tuple[list[float], list[float]]:
    """Per run: seconds to read the index and resolve, seconds for the whole pull (fetch included)."""
    from packaging.tags import Tag

    from librarian.config import load_layout
    from librarian.coords import GpuArch
    from librarian.ops.machine.pull import fetch_checked
    from librarian.ops.resolve import Wants, resolve
    from librarian.ops.store.reindex import read_index_or_tree

    wants = Wants(GpuArch.parse("89"), (2, 8), (12, 8), (Tag("cp311", "cp311", "linux_x86_64"),))
    resolve_s, total_s = [], []
    for _ in range(repeat):
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            store = make_store()  # type: ignore[operator]
            index, note = read_index_or_tree(store, load_layout(), [big.PULLED])
            found = resolve(index.for_package(big.PULLED), big.PULLED, wants)
            resolve_s.append(time.perf_counter() - start)
            assert found.pick is not None and not note, (store_name, found, note)
            fetch_checked(store, found.pick, Path(out))
            total_s.append(time.perf_counter() - start)
    return resolve_s, total_s


def cli_pull(repo: str, env: dict[str, str], cache: Path | None) -> float:
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "librarian", "pull", big.PULLED, *PULL, "--repo", repo, "-o", out],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"librarian pull failed: {done.stderr.strip()}")
    return took


def show(label: str, values: list[float]) -> str:
    return f"{label} median {statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f}, n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", type=Path, default=None, help="make_big_store.py's --root (default: build one)"
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--packages", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-pull-index-"))
    root = args.root or work / "big"
    port = free_port()
    env = {
        **os.environ,
        **big.client_env(f"http://127.0.0.1:{port}", work / "hf-home"),
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    env.pop("HF_TOKEN", None)
    os.environ.update(env)  # before huggingface_hub is imported: it reads these once
    from librarian.stores.hub import HubStore
    from librarian.stores.local import LocalStore
    from tests.loophub.server import LoopHub

    cache = work / "hf-home" / "hub"
    try:
        with LoopHub(root / "storage", port=port) as hub:
            local = root / "local"
            if not (root / "storage" / "repos").exists():
                start = time.perf_counter()
                files, entry, wheel = big.big_catalogue(args.entries, args.packages, work)
                big.write_hub(hub.url, files, entry, wheel)
                big.write_local(local, files, entry, wheel)
                print(
                    f"built the store ({args.entries} entries, {args.packages} packages) in {time.perf_counter() - start:.1f} s"
                )
            root_size = len(hub.files(big.REPO_ID)["index.json"])
            hub.log.clear()
            resolve_s, total_s = measure("hub", lambda: HubStore.from_url(REPO), cache, args.repeat)
            got = hub.log.downloaded()
            per_run = len(got) // args.repeat
            shard = f"index/{big.PULLED}.json"
            assert got[:per_run] == ["index.json", shard, got[2]] and got[2].endswith(".whl"), got[:per_run]
            served = hub.log.bytes_served("resolve") // args.repeat
            print(f"hub: downloaded per pull: {', '.join(got[:per_run])}")
            print(
                f"hub: {served / 1e3:.1f} kB served per pull (index.json {root_size / 1e3:.1f} kB); "
                f"{hub.log.count() // args.repeat} requests per pull; tree listings: {hub.log.count('tree')}"
            )
            print(show("hub: read index + resolve", resolve_s))
            print(show("hub: resolve + fetch     ", total_s))
            print(
                show(
                    "hub: `librarian pull` process (cold cache)",
                    [cli_pull(REPO, env, cache) for _ in range(3)],
                )
            )
            if local.is_dir():
                resolve_s, total_s = measure("local", lambda: LocalStore(local), None, args.repeat)
                print(show("local: read index + resolve", resolve_s))
                print(show("local: resolve + fetch     ", total_s))
                print(
                    show(
                        "local: `librarian pull` process", [cli_pull(str(local), env, None) for _ in range(3)]
                    )
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
