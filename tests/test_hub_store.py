"""The Hub store against the loopback hub: the local end-to-end scenario, unchanged, on hf://datasets/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO = "hf://datasets/team/wheels"
SO = {"tinykern/__init__.py": b"X = 1\n"}
CELL = "tinykern/sm89/torch2.8-cu128"
FILE = "tinykern-0.1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl"
FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)
PULL = ("--sm", "89", "--python", "3.11", "--platform", "linux_x86_64", "--repo", REPO)


@pytest.fixture
def hub_published(run: Run, loophub: LoopHub, tmp_path: Path) -> LoopHub:
    make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    result = run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS, "--create")
    assert result.code == 0, result.err
    assert f"added  {CELL}/{FILE}" in result.out
    return loophub


def test_publish_needs_create_for_a_new_repo(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    result = run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS)
    assert result.code == 2
    assert result.err == f"librarian: error: {REPO}: no such dataset repo (publish --create makes it)\n"


def test_hub_scenario(run: Run, hub_published: LoopHub, tmp_path: Path) -> None:
    ls = run("ls", "--repo", REPO)
    assert ls.code == 0 and "tinykern  torch2.8-cu128  0.1.0 (311)" in ls.out
    assert run("verify", "--repo", REPO).code == 0
    deep = run("verify", "--repo", REPO, "--deep")
    assert deep.code == 0, deep.out
    got = run("pull", "tinykern", "--torch", "2.8", *PULL, "-o", "out")
    assert got.code == 0, got.err
    assert (tmp_path / "out" / FILE).is_file()
    # It links no torch: a later torch line is served by the same bytes, and pull says why.
    later = run("pull", "tinykern", "--torch", "2.9", *PULL, "-o", "out2")
    assert later.code == 0 and "(built for torch 2.8, cu128): the wheel does not link torch" in later.err
    again = run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS)
    assert again.code == 0 and "unchanged" in again.out
    plan = run("gc", "--drop-torch", "2.8", "--repo", REPO)
    assert plan.code == 0 and f"remove  {CELL}/{FILE}" in plan.out
    assert "remove 1 wheel" in plan.out
    assert "warning: this plan removes every wheel of tinykern; --yes needs --allow-empty" in plan.out
    refused = run("gc", "--drop-torch", "2.8", "--repo", REPO, "--yes")
    assert refused.code == 2 and "--allow-empty" in refused.err
    done = run("gc", "--drop-torch", "2.8", "--repo", REPO, "--yes", "--allow-empty")
    assert done.code == 0 and "removed 1 wheel file(s)" in done.out
    listing = run("ls", "--repo", REPO, "--json")
    assert json.loads(listing.out)["packages"] == {}
    assert run("verify", "--repo", REPO).code == 0


def test_a_revision_pins_what_is_read(run: Run, hub_published: LoopHub, tmp_path: Path) -> None:
    first = hub_published.head("team/wheels")
    make_wheel(tmp_path / "d2", "tinykern", "0.2.0", "cp311-cp311-linux_x86_64", SO)
    assert run("publish", "d2/tinykern-0.2.0-cp311-cp311-linux_x86_64.whl", *FLAGS).code == 0
    old = run("ls", "--repo", f"{REPO}@{first}", "--json")
    assert old.code == 0, old.err
    data = json.loads(old.out)
    wheels = {w["path"]: w for w in data["wheels"]}
    cells = data["packages"]["tinykern"]["torch2.8-cu128"]["sm89"]
    assert [wheels[c]["version"] for c in cells] == ["0.1.0+cu128torch2.8"]
    listed = json.loads(run("ls", "--repo", REPO, "--json").out)
    versions = {w["path"]: w["version"] for w in listed["wheels"]}
    now = listed["packages"]["tinykern"]["torch2.8-cu128"]["sm89"]
    assert sorted(versions[c] for c in now) == ["0.1.0+cu128torch2.8", "0.2.0+cu128torch2.8"]
    bad = run("ls", "--repo", f"{REPO}@nope")
    assert bad.code == 2 and bad.err == f"librarian: error: {REPO}@nope: no revision 'nope'\n"
