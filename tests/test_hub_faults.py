"""The Hub store under faults, conflicts and many publishers: it lands once, or fails with one line,
and the repo never holds a wheel without its index entry or an entry without its wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from tests.builders import HERE_PYTHON, HERE_TAG, make_wheel
from tests.conftest import Run
from tests.loophub.fixtures import FAKE_TOKEN
from tests.loophub.server import LoopHub

REPO_ID = "team/wheels"
REPO = f"hf://datasets/{REPO_ID}"
FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)


def wheels(directory: Path, count: int, prefix: str = "pkg", size: int = 64) -> list[Path]:
    return [
        make_wheel(
            directory,
            f"{prefix}{i}",
            "1.0",
            "cp311-cp311-linux_x86_64",
            {f"{prefix}{i}/__init__.py": os.urandom(size)},
        )
        for i in range(count)
    ]


def consistent(hub: LoopHub) -> tuple[set[str], set[str]]:
    """The wheel files in the repo and the paths its index lists: must be equal."""
    files = hub.files(REPO_ID)
    stored = {p for p in files if p.endswith(".whl")}
    root = json.loads(files["index.json"])
    listed = {
        w["path"] for pkg in root["packages"].values() for w in json.loads(files[pkg["shard"]])["wheels"]
    }
    return stored, listed


def commits(hub: LoopHub) -> list[str]:
    return [c.title for c in HfApi(endpoint=hub.url).list_repo_commits(REPO_ID, repo_type="dataset")]


@pytest.fixture
def repo(run: Run, loophub: LoopHub, tmp_path: Path) -> LoopHub:
    first = make_wheel(tmp_path / "seed", "seed", "1.0", HERE_TAG)  # pulled with --install, into this Python
    assert run("publish", str(first), *FLAGS, "--create").code == 0
    return loophub


def test_a_5xx_burst_on_the_commit_is_retried_once_landed(run: Run, repo: LoopHub, tmp_path: Path) -> None:
    repo.fail("commit", times=2, status=503)
    result = run("publish", *map(str, wheels(tmp_path / "d", 3)), *FLAGS)
    assert result.code == 0, result.err
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 4
    assert sum("publish" in t for t in commits(repo)) == 2  # the seed and this one, not more


def test_a_lost_commit_answer_is_found_in_the_history_not_committed_twice(
    run: Run, repo: LoopHub, tmp_path: Path
) -> None:
    repo.lose_response("commit")
    result = run("publish", *map(str, wheels(tmp_path / "d", 2)), *FLAGS)
    assert result.code == 0, result.err
    assert sum("publish: 2 wheels" in t for t in commits(repo)) == 1
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 3


def test_a_dropped_upload_is_retried(run: Run, repo: LoopHub, tmp_path: Path) -> None:
    repo.drop("lfs_upload", phase="request", after_bytes=100)
    big = wheels(tmp_path / "d", 1, size=200_000)
    result = run("publish", *map(str, big), *FLAGS)
    assert result.code == 0, result.err
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 2


def test_a_commit_landing_between_plan_and_commit_is_replanned(
    run: Run, repo: LoopHub, tmp_path: Path
) -> None:
    other = make_wheel(tmp_path / "other", "other", "1.0", "cp311-cp311-linux_x86_64")
    repo.land_concurrent_commit(REPO_ID, {"notes/other-writer.txt": b"hello\n"})
    result = run("publish", str(other), *FLAGS)
    assert result.code == 0, result.err
    files = repo.files(REPO_ID)
    assert "notes/other-writer.txt" in files  # the other writer's commit survived
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 2


def test_a_persistent_failure_is_one_line_and_leaves_the_repo_as_it_was(
    run: Run, repo: LoopHub, tmp_path: Path
) -> None:
    before = repo.head(REPO_ID)
    repo.fail("commit", times=100, status=400)
    result = run("publish", *map(str, wheels(tmp_path / "d", 2)), *FLAGS)
    assert result.code == 2
    assert (
        result.err.startswith(f"librarian: error: {REPO}: commit: HTTP 400") and result.err.count("\n") == 1
    )
    assert repo.head(REPO_ID) == before
    repo.clear_faults()
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 1


def test_pull_refuses_bytes_that_do_not_match_the_index(run: Run, repo: LoopHub, tmp_path: Path) -> None:
    stored, _ = consistent(repo)
    (path,) = stored
    HfApi(endpoint=repo.url).create_commit(
        REPO_ID,
        [CommitOperationAdd(path, b"PK not the wheel")],
        commit_message="overwrite",
        repo_type="dataset",
    )
    result = run(
        "pull",
        "seed",
        "--sm",
        "89",
        "--torch",
        "2.8",
        "--python",
        HERE_PYTHON,
        "--platform",
        "linux_x86_64",
        "--repo",
        REPO,
        "-o",
        "out",
        "--install",
    )
    assert result.code == 2
    assert "do not match the index's sha256; refused" in result.err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_the_token_never_appears_in_output(run: Run, repo: LoopHub, tmp_path: Path) -> None:
    outputs = []
    for argv in (
        ("ls", "--repo", REPO),
        ("verify", "--repo", REPO, "--deep"),
        ("gc", "--drop-torch", "2.8", "--repo", REPO),
        ("pull", "nope", "--sm", "89", "--torch", "2.8", "--repo", REPO),
        ("publish", *map(str, wheels(tmp_path / "d", 1)), *FLAGS),
    ):
        result = run(*argv)
        outputs += [result.out, result.err]
    repo.fail("commit", times=100, status=401)
    denied = run("publish", *map(str, wheels(tmp_path / "e", 1, prefix="q")), *FLAGS)
    assert denied.code == 3 and "check HF_TOKEN" in denied.err  # refused us: exit 3
    outputs += [denied.out, denied.err]
    assert not any(FAKE_TOKEN in text for text in outputs)
    assert repo.token_leaks == []


def test_eight_concurrent_publishers_all_land(run: Run, repo: LoopHub, tmp_path: Path) -> None:
    env = {**os.environ, "LIBRARIAN_HUB_ATTEMPTS": "40"}
    procs = []
    for n in range(8):
        # 5 wheels each (20 before): the publishers still race for the commit (re-planning on conflicts) and
        # the hub serves a quarter of the uploads, which was most of this test's time besides the start-ups
        batch = wheels(tmp_path / f"w{n}", 5, prefix=f"p{n}x")
        cmd = [sys.executable, "-m", "librarian", "publish", *map(str, batch), *FLAGS]
        procs.append(
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "5 file(s) written" in out
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 41
    result = run(
        "verify", "--repo", REPO
    )  # in-process: the check, not the racing, needs no process of its own
    assert result.code == 0, result.out + result.err


def test_a_rate_limit_window_is_waited_out_and_the_publish_lands(
    run: Run, repo: LoopHub, tmp_path: Path
) -> None:
    # As huggingface.co answers past its API budget: no Retry-After, the IETF draft's headers instead.
    # A 3 s window: every request in it is refused (retrying on a short backoff only spends the retries).
    repo.rate_limit(
        "repo_info",
        retry_after=None,
        ratelimit='"api";r=0;t=3',
        window_s=3.0,
        ratelimit_policy='"fixed window";"api";q=500;w=300',
    )
    result = run("publish", *map(str, wheels(tmp_path / "d", 1)), *FLAGS)
    assert result.code == 0, result.err
    waits = [line for line in result.err.splitlines() if "HTTP 429" in line]
    assert (
        len(waits) == 1 and "waiting 3 s as it asks (up to 300 s in all: LIBRARIAN_HUB_MAX_WAIT)" in waits[0]
    )
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 2


def test_a_rate_limit_past_the_bound_exits_3_naming_the_wait(run: Run, repo: LoopHub, tmp_path: Path) -> None:
    repo.rate_limit("repo_info", times=1, retry_after=None, ratelimit='"api";r=0;t=400')
    result = run("publish", *map(str, wheels(tmp_path / "d", 1)), *FLAGS)
    assert result.code == 3
    assert result.err.count("\n") == 1 and "HTTP 429" in result.err and "retry in 7 min" in result.err
    stored, listed = consistent(repo)
    assert stored == listed and len(stored) == 1  # nothing half-written


def test_the_rate_limit_bound_is_a_setting(
    run: Run, repo: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_HUB_MAX_WAIT", "2")
    repo.rate_limit("repo_info", times=1, retry_after=None, ratelimit='"api";r=0;t=3')
    result = run("publish", *map(str, wheels(tmp_path / "d", 1)), *FLAGS)
    assert result.code == 3 and "retry in 3 s" in result.err


def test_a_refused_connection_is_tried_once_more_not_backed_off_for_seconds() -> None:
    """Issue 46 item 4: a refused connection on loopback was retried with four backoffs (9 s) before the
    cached index was used; a refusal is an answer: one retry. A time-out still gets every retry."""
    import socket

    import httpx2

    from librarian.stores.hub_http import NetPolicy, refused, retrying

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    calls: list[int] = []

    def connect() -> None:
        calls.append(1)
        httpx2.get(f"http://127.0.0.1:{port}/", timeout=2)

    policy = NetPolicy(retries=4, backoff=0.5)
    with pytest.raises(httpx2.ConnectError) as caught:
        retrying("test", connect, policy)
    assert refused(caught.value) and len(calls) == 2  # one retry, not policy.retries of them

    timeouts: list[int] = []

    def slow() -> None:
        timeouts.append(1)
        raise httpx2.ReadTimeout("slow")

    with pytest.raises(httpx2.ReadTimeout):
        retrying("test", slow, NetPolicy(retries=3, backoff=0.0))
    assert len(timeouts) == 4
