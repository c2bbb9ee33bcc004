"""Build a big store for the resolution benchmark: 100,000 index entries over many packages.

The index files (root, one shard per package, the per-combo pip pages) are rendered by librarian's own
code from synthetic entries and written straight into a loophub repo with ``HfApi.create_commit``, and
optionally into a local store directory. The wheels are absent, except one real small wheel: the newest
sm89 / torch 2.8 / cu128 / cp311 build of the package that ``bench_pull_index.py`` pulls.

    .venv/bin/python benchmarks/make_big_store.py --root /tmp/big-hub --local /tmp/big-local
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from librarian.catalogue import render_catalogue
from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label
from librarian.index import Index, IndexEntry
from librarian.wheel.wheelfile import sha256_file
from tests.builders import make_wheel

REPO_ID = "bench/big"
PULLED = "pkg00042"
SMS = ("80", "86", "89", "90", "120")
COMBOS = ((12, 8, 2, 8), (12, 6, 2, 8), (12, 8, 2, 7), (13, 0, 2, 9))  # cuda major, minor, torch major, minor
PYTHONS = ("cp310", "cp311", "cp312", "cp313")


def client_env(url: str, home: Path) -> dict[str, str]:
    """The env vars huggingface_hub reads at import, pointing it at the loophub (tests/loophub/fixtures.py)."""
    return {
        "HF_ENDPOINT": url,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_HUB_ETAG_TIMEOUT": "10",
        "HF_HUB_DOWNLOAD_TIMEOUT": "30",
    }


def synthetic_entries(count: int, packages: int) -> list[IndexEntry]:
    """``count`` entries spread evenly over ``packages``: versions x combos x sm x Python, newest last."""
    layout = load_layout()
    per = max(1, count // packages)
    cells = list(itertools.product(COMBOS, SMS, PYTHONS))
    entries = []
    for p in range(packages):
        name = f"pkg{p:05d}"
        for i in range(per):
            (cu_major, cu_minor, t_major, t_minor), sm, py = cells[i % len(cells)]
            version = f"1.{i // len(cells)}"
            label = Label((cu_major, cu_minor), (t_major, t_minor))
            filename = f"{name}-{version}+{label}-{py}-{py}-linux_x86_64.whl"
            cell = Cell(name, GpuArch.parse(sm), label)
            path = layout.path_for(cell, filename)
            sha = f"{p:08x}{i:08x}".ljust(64, "0")
            entries.append(IndexEntry(path, sha, 50_000 + i, cell, "2025-01-01T00:00:00Z"))
    return entries


def pulled_wheel(directory: Path) -> tuple[IndexEntry, Path]:
    """A real small wheel for ``PULLED``, newer than every synthetic one, and its entry."""
    label = Label((12, 8), (2, 8))
    wheel = make_wheel(
        directory,
        PULLED,
        f"9.0+{label}",
        "cp311-cp311-linux_x86_64",
        {f"{PULLED}/__init__.py": os.urandom(512)},
    )
    cell = Cell(PULLED, GpuArch.parse("89"), label)
    path = load_layout().path_for(cell, wheel.name)
    return IndexEntry(path, sha256_file(wheel), wheel.stat().st_size, cell, "2025-01-02T00:00:00Z"), wheel


def big_catalogue(count: int, packages: int, work: Path) -> tuple[dict[str, bytes], IndexEntry, Path]:
    """Every generated file of the store, the pulled wheel's entry and the wheel file."""
    entry, wheel = pulled_wheel(work)
    index = Index(
        load_layout(), tuple(sorted([*synthetic_entries(count - 1, packages), entry], key=lambda e: e.path))
    )
    return render_catalogue(index), entry, wheel


def write_hub(url: str, files: dict[str, bytes], entry: IndexEntry, wheel: Path, batch: int = 300) -> int:
    """Commit the files into ``REPO_ID`` on the hub at ``url``, in batches, the root index last. Returns commits."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=url, token=False)
    api.create_repo(REPO_ID, repo_type="dataset", exist_ok=True)
    paths = sorted(files, key=lambda p: p == "index.json")
    commits = 0
    for start in range(0, len(paths), batch):
        ops = [CommitOperationAdd(p, files[p]) for p in paths[start : start + batch]]
        if start == 0:
            ops.append(CommitOperationAdd(entry.path, str(wheel)))
        api.create_commit(REPO_ID, ops, commit_message=f"big store {start}", repo_type="dataset")
        commits += 1
    return commits


def write_local(root: Path, files: dict[str, bytes], entry: IndexEntry, wheel: Path) -> None:
    """The same store as a local directory."""
    for path, data in [*files.items(), (entry.path, wheel.read_bytes())]:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, required=True, help="loophub storage directory to create")
    parser.add_argument("--local", type=Path, default=None, help="also write a local store here")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--packages", type=int, default=1000)
    args = parser.parse_args(argv)
    for key, value in client_env("http://127.0.0.1:1", args.root / "hf-home").items():
        os.environ.setdefault(key, value)  # before huggingface_hub is imported; the endpoint is passed
    from tests.loophub.server import LoopHub

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        files, entry, wheel = big_catalogue(args.entries, args.packages, Path(tmp))
        print(
            f"rendered {len(files)} files, {sum(map(len, files.values())) / 1e6:.1f} MB, in {time.perf_counter() - start:.1f} s"
        )
        with LoopHub(args.root / "storage") as hub:
            commits = write_hub(hub.url, files, entry, wheel)
        print(f"wrote {REPO_ID} in {commits} commits under {args.root}")
        if args.local:
            write_local(args.local, files, entry, wheel)
            print(f"wrote the local store {args.local}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
