"""When the Hub cannot be reached (after retries) or HF_HUB_OFFLINE=1, reads use the newest cached index and
say so; never silently. Nothing cached and no Hub is exit 3, one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.builders import make_wheel, torch_extension_so
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO = "hf://datasets/team/wheels"
PULL = (
    "tinykern",
    "--sm",
    "89",
    "--torch",
    "2.8",
    "--python",
    "3.11",
    "--platform",
    "linux_x86_64",
    "--repo",
    REPO,
)


def test_pull_falls_back_to_the_cache_and_says_so(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    assert (
        run(
            "publish",
            str(wheel),
            "--sm",
            "89",
            "--torch",
            "2.8",
            "--cuda",
            "12.8",
            "--repo",
            REPO,
            "--create",
        ).code
        == 0
    )
    online = run("pull", *PULL, "-o", "first")
    assert online.code == 0, online.err
    assert "cannot reach the Hub" not in online.err
    loophub.stop()
    offline = run("pull", *PULL, "-o", "first")  # the wheel is there already: only the index is needed
    assert offline.code == 0, offline.err
    assert (
        "cannot reach the Hub (ConnectError, also after retries); using the cached index of commit"
        in offline.err
    )
    assert "may be stale" in offline.err
    elsewhere = run("pull", *PULL, "-o", "second")  # the wheel was kept by its sha256 when first pulled
    assert elsewhere.code == 0, elsewhere.err
    assert "served from this machine's cache" in elsewhere.err
    assert (tmp_path / "second").iterdir() and (tmp_path / "first").iterdir()


def test_offline_pull_after_your_own_gc_serves_the_wheel_by_its_sha256(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publish torch 2.9 and 2.10 builds, pull the 2.9 one, gc 2.10 away (a new commit), go offline: pull
    finds the index of the gc's commit and the wheel downloaded under the commit before it."""
    for torch, seed in (("2.9", b"a"), ("2.10", b"b")):
        wheel = make_wheel(
            tmp_path / f"dist-{torch}",
            "tinykern",
            "0.1.0",
            "cp311-cp311-linux_x86_64",
            {"tinykern/_C.so": torch_extension_so(seed)},
        )
        published = run("publish", str(wheel), "--sm", "89", "--torch", torch, "--cuda", "12.8",
                        "--trust-sm", "--repo", REPO, "--create")  # fmt: skip
        assert published.code == 0, published.err
    machine = ("tinykern", "--sm", "89", "--torch", "2.9", "--python", "3.11", "--platform", "linux_x86_64")
    first = run("pull", *machine, "--repo", REPO, "-o", "first")
    assert first.code == 0, first.err
    assert "served from" not in first.err
    assert run("gc", "--drop-torch", "2.10", "--yes", "--repo", REPO).code == 0
    loophub.stop()  # nothing is reached: the Hub is gone
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = run("pull", *machine, "--repo", REPO, "-o", "second")
    assert offline.code == 0, offline.err
    assert "HF_HUB_OFFLINE is set; using the cached index of commit" in offline.err
    assert "served from this machine's cache (sha256 " in offline.err
    (got,) = (tmp_path / "second").iterdir()
    assert got.read_bytes() == next((tmp_path / "first").iterdir()).read_bytes()


def test_nothing_cached_and_no_hub_is_one_line(run: Run, loophub: LoopHub) -> None:
    loophub.stop()
    result = run("pull", *PULL, "-o", "out")
    assert result.code == 3
    assert result.err == (
        f"librarian: error: {REPO}: cannot reach the Hub (ConnectError, also after retries), "
        "and nothing of this repo is cached here\n"
    )


def test_writes_never_use_the_cache(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    assert (
        run(
            "publish",
            str(wheel),
            "--sm",
            "89",
            "--torch",
            "2.8",
            "--cuda",
            "12.8",
            "--repo",
            REPO,
            "--create",
        ).code
        == 0
    )
    assert run("pull", *PULL, "-o", "first").code == 0
    loophub.stop()
    other = make_wheel(tmp_path / "d2", "tinykern", "0.2.0", "cp311-cp311-linux_x86_64")
    result = run("publish", str(other), "--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)
    assert result.code == 3
    assert "cannot reach the Hub" in result.err and result.err.count("\n") == 1


def test_offline_after_librarians_own_commit(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc's commit (or any of librarian's) is cached with its index: a pull right after works offline."""
    for version in ("0.1.0", "0.2.0"):
        wheel = make_wheel(tmp_path / f"dist-{version}", "tinykern", version, "cp311-cp311-linux_x86_64")
        assert (
            run(
                "publish",
                str(wheel),
                "--sm",
                "89",
                "--torch",
                "2.8",
                "--cuda",
                "12.8",
                "--repo",
                REPO,
                "--create",
            ).code
            == 0
        )
    assert run("pull", *PULL, "-o", "first").code == 0  # fetches 0.2.0
    gc = run(
        "gc", "--keep-versions", "1", "--yes", "--repo", REPO
    )  # drops 0.1.0: a new commit, its index never read
    assert gc.code == 0, gc.err
    made = re.search(r"/commit/([0-9a-f]{40})", gc.out)
    assert made is not None, gc.out
    loophub.stop()  # nothing is reached: the Hub is gone
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = run(
        "pull", *PULL, "-o", "first"
    )  # the wheel is there with the right sha256: nothing is fetched
    assert offline.code == 0, offline.err
    assert (
        f"using the cached index of commit {made[1][:12]} of " in offline.err
        and " ago (it may be stale)" in offline.err
    )
    monkeypatch.delenv("HF_HUB_OFFLINE")
    loophub.stop()
    unreachable = run("pull", *PULL, "-o", "first")
    assert unreachable.code == 0, unreachable.err
    assert made[1][:12] in unreachable.err


def test_offline_nothing_is_asked_of_the_hub_nor_retried(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 53: with HF_HUB_OFFLINE=1 a read never reaches the Hub (no request, no retry, no backoff);
    what nothing cached can serve is one line at once."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loophub.log.clear()
    result = run("pull", *PULL, "-o", "out")
    assert result.code == 3 and result.err.count("\n") == 1 and "HF_HUB_OFFLINE" in result.err, result.err
    assert loophub.log.records == []  # not one request: nothing to retry
