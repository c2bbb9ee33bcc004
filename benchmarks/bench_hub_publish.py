"""Benchmark: many concurrent ``librarian publish`` processes against one Hub repo, direct vs fan-in.

Direct: every job commits its wheels with the index, ``parent_commit`` set, re-planning on 412.
Stage: every job runs ``publish --stage`` (a commit of wheels + pending entries, no index, no parent),
then one ``librarian reindex`` merges them in one commit.
Manifest: every job runs ``publish --stage --manifest`` (uploads the bytes, no commit, writes a
manifest), then one ``librarian reindex --manifest`` commits once. Each run gets a fresh loophub (tests/loophub) on
127.0.0.1; the CLI processes reach it through the env vars huggingface_hub reads at import.

Reports wall time, commits made, 412 conflicts (from the loophub's request log), and whether every
wheel ended up in the index.

    .venv/bin/python benchmarks/bench_hub_publish.py                 # 8, 32 and 64 jobs, 2 wheels each
    .venv/bin/python benchmarks/bench_hub_publish.py --jobs 64 --wheels 5 --pattern manifest
    .venv/bin/python benchmarks/bench_hub_publish.py --jobs 48 --commit-limit 32   # a budget smaller than the matrix
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.builders import make_wheel
from tests.loophub.server import LoopHub

REPO_ID = "bench/wheels"
REPO = f"hf://datasets/{REPO_ID}"
FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)


def client_env(url: str, home: Path) -> dict[str, str]:
    """What a child process needs to talk to the loophub (see tests/loophub/fixtures.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE", "LIBRARIAN_REPO")}
    env.update(
        {
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
            "LIBRARIAN_HUB_ATTEMPTS": "80",
            "LIBRARIAN_HUB_TIMEOUT": "120",
            # This checkout's librarian, whatever the environment has installed.
            "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
        }
    )
    return env


@dataclass
class Outcome:
    pattern: str
    jobs: int
    wheels: int
    publish_s: float
    reindex_s: float
    commits: int
    conflicts: int
    indexed: int
    failed: int

    def row(self) -> str:
        total = self.publish_s + self.reindex_s
        ok = (
            "yes"
            if self.indexed == self.wheels and not self.failed
            else f"NO ({self.indexed}/{self.wheels}, {self.failed} failed)"
        )
        return (
            f"{self.pattern:<8} {self.jobs:>4} {self.wheels:>6} {self.publish_s:>9.1f} {self.reindex_s:>9.1f} "
            f"{total:>8.1f} {self.commits:>7} {self.conflicts:>5}  {ok}"
        )


def _run_jobs(batches: list[list[Path]], env: dict[str, str], pattern: str, work: Path) -> tuple[float, int]:
    start = time.perf_counter()
    procs = []
    for n, batch in enumerate(batches):
        log = (work / f"job{n}.log").open("w")
        extra = {
            "direct": (),
            "stage": ("--stage",),
            "manifest": ("--stage", "--manifest", str(work / "manifests" / f"job{n}.json")),
        }
        cmd = [sys.executable, "-m", "librarian", "publish", *map(str, batch), *FLAGS, *extra[pattern]]
        procs.append((subprocess.Popen(cmd, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT), log))
    failed = 0
    for proc, log in procs:
        failed += proc.wait(timeout=1800) != 0
        log.close()
    return time.perf_counter() - start, failed


def _indexed(hub: LoopHub) -> int:
    files = hub.files(REPO_ID)
    if "index.json" not in files:
        return 0
    root = json.loads(files["index.json"])
    return sum(len(json.loads(files[p["shard"]])["wheels"]) for p in root["packages"].values())


def bench(
    pattern: str, jobs: int, per_job: int, size: int, work: Path, commit_limit: int | None = None
) -> Outcome:
    """One fresh hub, ``jobs`` concurrent publishers of ``per_job`` wheels each, in ``pattern``."""
    work.mkdir(parents=True)
    with LoopHub(work / "hub") as hub:
        hub.limit_commits(commit_limit)  # huggingface.co: 128 per hour per repo, then 429
        env = client_env(hub.url, work / "hf-home")
        from huggingface_hub import HfApi

        HfApi(endpoint=hub.url, token=False).create_repo(REPO_ID, repo_type="dataset")
        batches = [
            [
                make_wheel(
                    work / "dist" / f"j{j}",
                    f"j{j}w{i}",
                    "1.0",
                    "cp311-cp311-linux_x86_64",
                    {f"j{j}w{i}/__init__.py": os.urandom(size)},
                )
                for i in range(per_job)
            ]
            for j in range(jobs)
        ]
        hub.log.clear()
        publish_s, failed = _run_jobs(batches, env, pattern, work)
        reindex_s = 0.0
        if pattern != "direct":
            start = time.perf_counter()
            extra = ("--manifest", str(work / "manifests")) if pattern == "manifest" else ()
            done = subprocess.run(
                [sys.executable, "-m", "librarian", "reindex", "--repo", REPO, *extra],
                env=env,
                cwd=work,
                capture_output=True,
                text=True,
                check=False,
            )
            reindex_s = time.perf_counter() - start
            failed += done.returncode != 0
        commits = [r for r in hub.log.select("commit", "POST")]
        return Outcome(
            pattern,
            jobs,
            jobs * per_job,
            publish_s,
            reindex_s,
            sum(r.status == 200 for r in commits),
            sum(r.status == 412 for r in commits),
            _indexed(hub),
            failed,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, nargs="+", default=[8, 32, 64], help="concurrent publishers (default 8 32 64)"
    )
    parser.add_argument("--wheels", type=int, default=2, help="wheels per job (default 2)")
    parser.add_argument("--size", type=int, default=256, help="random bytes in each wheel (default 256)")
    parser.add_argument("--pattern", choices=("direct", "stage", "manifest", "all"), default="all")
    parser.add_argument(
        "--commit-limit", type=int, default=None, help="commits per hour the hub allows (the Hub: 128)"
    )
    args = parser.parse_args(argv)
    patterns = ("direct", "stage", "manifest") if args.pattern == "all" else (args.pattern,)
    print(f"{os.cpu_count()} CPUs; {args.wheels} wheel(s) per job of {args.size} random bytes", flush=True)
    print("pattern  jobs wheels publish_s reindex_s  total_s commits   412  all indexed", flush=True)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="bench-hub-publish-") as tmp:
        for jobs in args.jobs:
            for pattern in patterns:
                outcome = bench(
                    pattern, jobs, args.wheels, args.size, Path(tmp) / f"{pattern}-{jobs}", args.commit_limit
                )
                print(outcome.row(), flush=True)
                bad += outcome.indexed != outcome.wheels or outcome.failed > 0
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
