"""gc --purge on the Hub over time: storage earlier gcs left in the history, a grace window for staged
uploads, and pins that survive a purge (the loophub rewrites history as the Hub does when asked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from huggingface_hub import HfApi

from tests.builders import HERE_PYTHON, HERE_TAG, make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO_ID = "team/wheels"
REPO = f"hf://datasets/{REPO_ID}"
COMBO = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)
PULL = (
    "--sm",
    "89",
    "--torch",
    "2.8",
    "--cuda",
    "12.8",
    "--python",
    HERE_PYTHON,
    "--platform",
    "linux_x86_64",
    "--repo",
    REPO,
)


def wheel(tmp_path: Path, name: str, version: str, size: int = 100_000) -> Path:
    return make_wheel(
        tmp_path / f"{name}-{version}",
        name,
        version,
        HERE_TAG,
        {f"{name}/__init__.py": os.urandom(size)},
    )


def lfs_oids(hub: LoopHub) -> set[str]:
    return {f.file_oid for f in HfApi(endpoint=hub.url).list_lfs_files(REPO_ID, repo_type="dataset")}


def sha_of(hub: LoopHub, package: str, version: str) -> str:
    shard = json.loads(hub.files(REPO_ID)[f"index/{package}.json"])
    return next(w["sha256"] for w in shard["wheels"] if f"-{version}+" in w["path"])


def test_purge_frees_what_an_earlier_gc_left_in_the_history(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    assert run("publish", str(wheel(tmp_path, "tinykern", "0.1.0")), *COMBO, "--create").code == 0
    old = sha_of(loophub, "tinykern", "0.1.0")
    assert run("publish", str(wheel(tmp_path, "tinykern", "0.2.0")), *COMBO).code == 0
    dropped = run("gc", "--keep-versions", "1", "--yes", "--repo", REPO)  # no --purge: the object stays
    assert dropped.code == 0 and "'gc --purge' frees that storage" in dropped.out
    assert old in lfs_oids(loophub)
    plan = run(
        "gc", "--purge", "--purge-grace", "0", "--dry-run", "--repo", REPO, "--json"
    )  # --purge alone: no removals
    assert plan.code == 0, plan.err
    report = json.loads(plan.out)
    assert report["remove"] == [] and [b["sha256"] for b in report["purge"]] == [old]
    assert report["purge"][0]["size"] > 100_000
    assert old in lfs_oids(loophub)  # a plan only
    done = run("gc", "--purge", "--purge-grace", "0", "--yes", "--repo", REPO)
    assert done.code == 0, done.err
    assert f"purged  LFS object {old[:12]}" in done.out
    assert old not in lfs_oids(loophub) and sha_of(loophub, "tinykern", "0.2.0") in lfs_oids(loophub)
    assert run("verify", "--repo", REPO, "--deep").code == 0


def test_staged_uploads_survive_within_the_grace_window(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    assert run("publish", str(wheel(tmp_path, "seed", "1.0")), *COMBO, "--create").code == 0
    staged = run(
        "publish", str(wheel(tmp_path, "tinykern", "0.1.0")), *COMBO, "--stage", "--manifest", "m.json"
    )
    assert staged.code == 0, staged.err
    blob = json.loads((tmp_path / "m.json").read_text())["wheels"][0]["sha256"]
    assert blob in lfs_oids(loophub)  # uploaded, referenced by no commit until the reindex
    spared = json.loads(run("gc", "--purge", "--repo", REPO, "--json").out)  # the default grace: 24 h
    assert spared["purge"] == [] and spared["young"] == 1
    said = run("gc", "--purge", "--repo", REPO).out  # a purge that spared objects says so, and the way out
    assert "1 unreferenced LFS object(s) younger than 24 h kept" in said and "--purge-grace 0" in said
    day_old = time.time() - 25 * 3600
    os.utime(loophub.storage.lfs_path(blob), (day_old, day_old))
    stale = json.loads(run("gc", "--purge", "--repo", REPO, "--json").out)
    assert [b["sha256"] for b in stale["purge"]] == [blob]
    assert run("reindex", "--manifest", "m.json", "--repo", REPO).code == 0  # the reindex came after all
    assert json.loads(run("gc", "--purge", "--purge-grace", "0", "--repo", REPO, "--json").out)["purge"] == []


def test_a_requirements_file_written_before_a_purge_still_installs(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    assert run("publish", str(wheel(tmp_path, "tinykern", "0.1.0")), *COMBO, "--create").code == 0
    assert run("publish", str(wheel(tmp_path, "other", "1.0")), *COMBO).code == 0
    assert run("publish", str(wheel(tmp_path, "tinykern", "0.2.0")), *COMBO).code == 0
    written = run("pull", "other", "tinykern", *PULL, "--requirements", "req.txt")
    assert written.code == 0, written.err
    before = loophub.head(REPO_ID)
    purged = run("gc", "--keep-versions", "1", "--purge", "--purge-grace", "0", "--yes", "--repo", REPO)
    assert purged.code == 0 and "purged  LFS object" in purged.out
    assert HfApi(endpoint=loophub.url).list_repo_commits(REPO_ID, repo_type="dataset")[1].commit_id == before
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--target",
            str(tmp_path / "site"),
            "-r",
            str(tmp_path / "req.txt"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "other").is_dir() and (tmp_path / "site" / "tinykern").is_dir()


def test_the_loophub_rewrites_history_on_a_purge_as_the_hub_does(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    """What huggingface_hub's default (rewrite_history=True) does: new commit ids, the old ones answer 404."""
    assert run("publish", str(wheel(tmp_path, "tinykern", "0.1.0")), *COMBO, "--create").code == 0
    old_head = loophub.head(REPO_ID)
    api = HfApi(endpoint=loophub.url)
    items = list(api.list_lfs_files(REPO_ID, repo_type="dataset"))
    api.permanently_delete_lfs_files(REPO_ID, items, repo_type="dataset")
    assert loophub.head(REPO_ID) != old_head
    got = api.list_repo_tree(REPO_ID, repo_type="dataset", revision=loophub.head(REPO_ID), recursive=True)
    assert not [f for f in got if getattr(f, "lfs", None)]
    from huggingface_hub.errors import RevisionNotFoundError

    try:
        api.repo_info(REPO_ID, repo_type="dataset", revision=old_head)
    except RevisionNotFoundError:
        pass
    else:
        raise AssertionError("the old commit id still answers after a history rewrite")
