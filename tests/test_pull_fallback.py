"""pull reads index.json and one shard; with no index it lists the tree instead, and says so."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

HUB = "hf://datasets/team/wheels"
COMBO = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8")
PULL = ("--sm", "89", "--torch", "2.8", "--python", "3.11", "--platform", "linux_x86_64")
NOTE = (
    "librarian: note: {repo}: no index; listed the tree (its wheels judged by their paths alone): 1 wheel "
    "file(s) there; 'librarian reindex --adopt --repo {repo}' reads their bytes and takes them in\n"
)


def wheel_path(package: str) -> str:
    return f"{package}/sm89/torch2.8-cu128/{package}-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl"


def publish_packages(
    run: Run, tmp_path: Path, repo: str, *extra: str, names: tuple[str, ...] = ("alpha", "beta", "gamma")
) -> None:
    dist = [
        str(
            make_wheel(
                tmp_path / "dist",
                name,
                "1.0",
                "cp311-cp311-linux_x86_64",
                {f"{name}/__init__.py": os.urandom(32)},
            )
        )
        for name in names
    ]
    result = run("publish", *dist, *COMBO, "--repo", repo, *extra)
    assert result.code == 0, result.err


def test_pull_of_one_package_downloads_the_root_its_shard_and_the_wheel(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_packages(run, tmp_path, HUB, "--create")
    loophub.log.clear()
    here = run(
        "pull", "beta", *PULL, "--repo", HUB, "-o", "here"
    )  # the publisher's machine cached its commit
    assert here.code == 0 and here.err == "", here.err
    assert loophub.log.downloaded() == [wheel_path("beta")]
    loophub.log.clear()
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "another-machine"))
    got = run("pull", "beta", *PULL, "--repo", HUB, "-o", "out")
    assert got.code == 0, got.err
    assert got.err == ""
    assert loophub.log.downloaded() == ["index.json", "index/beta.json", wheel_path("beta")]
    assert loophub.log.count("tree") == 0  # never the whole tree


def test_pull_without_an_index_lists_the_hub_tree(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    publish_packages(run, tmp_path, HUB, "--create", "--stage")  # staged: wheels, but no index.json yet
    assert "index.json" not in loophub.files("team/wheels")
    got = run("pull", "beta", *PULL, "--repo", HUB, "-o", "out")
    assert got.code == 0, got.err
    assert NOTE.format(repo=HUB) in got.err
    assert (tmp_path / "out" / wheel_path("beta").rsplit("/", 1)[1]).is_file()
    miss = run("pull", "beta", "--sm", "90", *PULL[2:], "--repo", HUB, "-o", "out2")
    assert miss.code == 1 and "no index; listed the tree" in miss.err


def test_pull_without_an_index_takes_the_sha256_from_the_lfs_listing(
    run: Run, make_loophub: Callable[..., LoopHub], tmp_path: Path
) -> None:
    hub = make_loophub(lfs_threshold=1)  # every file goes to LFS, so the listing carries each sha256
    publish_packages(run, tmp_path, HUB, "--create", "--stage")
    hub.log.clear()
    got = run("pull", "gamma", *PULL, "--repo", HUB, "-o", "out")
    assert got.code == 0, got.err
    assert NOTE.format(repo=HUB) in got.err
    assert hub.log.downloaded() == [wheel_path("gamma")]  # no other wheel read to hash it


def test_pull_without_an_index_lists_the_local_tree(run: Run, tmp_path: Path) -> None:
    publish_packages(run, tmp_path, "wheelhouse")
    (tmp_path / "wheelhouse/index.json").unlink()
    shutil.rmtree(tmp_path / "wheelhouse/index")
    got = run("pull", "alpha", *PULL, "-o", "out")
    assert got.code == 0, got.err
    assert NOTE.format(repo="wheelhouse") in got.err
    assert (tmp_path / "out" / wheel_path("alpha").rsplit("/", 1)[1]).is_file()
    rebuilt = run("reindex", "--adopt")  # and the index can be rebuilt from the tree
    assert rebuilt.code == 0 and rebuilt.out.count("adopted  ") == 3
    assert run("verify").code == 0
