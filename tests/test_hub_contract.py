"""Where people meet the Hub store (README: Stores), over real HTTP with the real huggingface_hub client:
store addresses, missing stores, bounded time-outs, retried reads, exit 3, untrusted server text, the
shared dataset card, one copy on pull, named commits, offline reads, gc --purge and --allow-empty."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.fixtures import FAKE_TOKEN, point_client_at, restore_client
from tests.loophub.server import LoopHub

REPO_ID = "team/wheels"
REPO = f"hf://datasets/{REPO_ID}"
COMBO = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8")
PULL = ("--sm", "89", "--torch", "2.8", "--python", "3.11", "--platform", "linux_x86_64")


def wheel(tmp_path: Path, name: str = "tinykern", version: str = "0.1.0", size: int = 64) -> Path:
    files = {f"{name}/__init__.py": os.urandom(size)}
    return make_wheel(tmp_path / "dist" / version, name, version, "cp311-cp311-linux_x86_64", files)


def publish(run: Run, path: Path, *extra: str, repo: str = REPO) -> str:
    result = run("publish", str(path), *COMBO, "--repo", repo, *extra)
    assert result.code == 0, result.err
    return result.out


@pytest.fixture
def hub(run: Run, loophub: LoopHub, tmp_path: Path) -> LoopHub:
    publish(run, wheel(tmp_path), "--create")
    return loophub


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("librarian: error: "), err
    return lines[0]


# --- 1. store addresses ---------------------------------------------------------------------------


def test_the_web_url_people_copy_is_the_hub_store(run: Run, hub: LoopHub, tmp_path: Path) -> None:
    for address in (
        f"https://huggingface.co/datasets/{REPO_ID}",
        f"https://huggingface.co/datasets/{REPO_ID}/tree/main",
        f"{hub.url}/datasets/{REPO_ID}",  # the same under HF_ENDPOINT
    ):
        listing = run("ls", "--repo", address)
        assert listing.code == 0, listing.err
        assert "tinykern" in listing.out
    assert not (tmp_path / "https:").exists()


@pytest.mark.parametrize(
    "address",
    [
        "https://example.com/datasets/team/wheels",
        "https://huggingface.co/team/wheels",
        "hf://models/team/wheels",
        "s3://bucket/wheels",
        "hf://datasets/onlyname",
    ],
)
def test_any_other_url_is_bad_input_and_nothing_is_written(run: Run, tmp_path: Path, address: str) -> None:
    result = run("publish", str(wheel(tmp_path)), *COMBO, "--repo", address)
    assert result.code == 2
    assert address in one_error_line(result.err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"]


def test_a_missing_store_is_exit_2_for_every_command_but_publish(
    run: Run, hub: LoopHub, tmp_path: Path
) -> None:
    missing_hub = "hf://datasets/team/nosuch"
    for argv in (
        ("ls",),
        ("verify",),
        ("gc", "--keep-versions", "1"),
        ("reindex",),
        ("pull", "tinykern", *PULL),
    ):
        for repo in (missing_hub, "./no/such/dir"):
            result = run(*argv, "--repo", repo)
            assert result.code == 2, (argv, repo, result)
            line = one_error_line(result.err)
            assert "no such dataset repo" in line or "no such store" in line
    assert not (tmp_path / "no").exists()
    assert run("publish", str(wheel(tmp_path)), *COMBO, "--repo", missing_hub).code == 2  # --create makes one
    assert run("publish", str(wheel(tmp_path)), *COMBO, "--repo", "./fresh").code == 0  # a directory is made


# --- 2. bounded, honest networking ----------------------------------------------------------------


@pytest.fixture
def silent_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A server that accepts connections (the kernel's backlog) and never answers a byte."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    point_client_at(url, tmp_path / "hf-home", monkeypatch)
    # Short bounds keep the test quick: nothing ever answers here, so no bound is too short to be safe.
    monkeypatch.setenv("LIBRARIAN_HUB_TIMEOUT", "0.25")
    monkeypatch.setenv("LIBRARIAN_HUB_RETRY_BUDGET", "0.5")
    try:
        yield url
    finally:
        restore_client()
        sock.close()


def test_a_hub_that_never_answers_is_exit_3_within_the_time_out(
    run: Run, silent_hub: str, tmp_path: Path
) -> None:
    for argv in (("ls",), ("pull", "tinykern", *PULL), ("publish", str(wheel(tmp_path)), *COMBO, "--create")):
        start = time.monotonic()
        result = run(*argv, "--repo", REPO)
        took = time.monotonic() - start
        assert result.code == 3, (argv, result)
        line = one_error_line(result.err)
        assert "cannot reach the Hub (ReadTimeout, also after retries)" in line
        # Far above the ~1 s it needs, and below the 30 s the default read time-out alone would take.
        assert took < 25, (argv, took)


def test_a_trickling_answer_is_cut(
    run: Run, hub: LoopHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LIBRARIAN_HUB_TIMEOUT", "1")
    monkeypatch.setenv("LIBRARIAN_HUB_RETRY_BUDGET", "2")
    monkeypatch.setenv(
        "LIBRARIAN_CACHE", str(tmp_path / "another-machine")
    )  # the publisher's cache holds the index
    hub.trickle("resolve", 0.2, times=100, path_contains="index.json")
    start = time.monotonic()
    result = run("ls", "--repo", REPO)
    assert result.code == 3 and "index.json: cannot reach the Hub (ReadTimeout" in one_error_line(result.err)
    assert time.monotonic() - start < 25  # needs ~2 s (the budget); uncut, the trickle takes minutes


def test_a_burst_of_503s_on_reads_is_absorbed(run: Run, hub: LoopHub, tmp_path: Path) -> None:
    hub.fail("repo_info", times=3, status=503)
    hub.fail("resolve", times=3, status=500, path_contains="index.json")
    hub.rate_limit("resolve", times=1, path_contains="index/")
    listing = run("ls", "--repo", REPO)
    assert listing.code == 0, listing.err
    assert "tinykern" in listing.out and listing.err == ""
    hub.fail("create_repo", times=2, status=503)
    made = run(
        "publish", str(wheel(tmp_path, "other")), *COMBO, "--repo", "hf://datasets/team/new", "--create"
    )
    assert made.code == 0, made.err


def test_reads_that_keep_failing_are_exit_3_and_say_what(
    run: Run, hub: LoopHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        "LIBRARIAN_CACHE", str(tmp_path / "another-machine")
    )  # the publisher's cache holds the index
    hub.fail("resolve", times=8, status=503, path_contains="index.json")
    start = time.monotonic()
    result = run("ls", "--repo", REPO)
    assert result.code == 3
    line = one_error_line(result.err)
    assert "index.json: the Hub answered HTTP 503, also after retries; try again later" in line
    assert "no cached copy" not in line
    assert time.monotonic() - start < 25  # needs ~0.2 s; far above it, on a loaded machine too


def test_refused_credentials_are_exit_3(run: Run, hub: LoopHub, tmp_path: Path) -> None:
    hub.fail("commit", times=100, status=403)
    result = run("publish", str(wheel(tmp_path, "other")), *COMBO, "--repo", REPO)
    assert result.code == 3 and "refused (HTTP 403); check HF_TOKEN" in one_error_line(result.err)


def test_a_wrong_token_on_reads_is_exit_3_and_not_printed(
    run: Run, make_loophub: Callable[..., LoopHub], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_loophub(auth_reads=True)
    publish(run, wheel(tmp_path), "--create")
    wrong = "hf_WrongTokenWrongToken0123456789"
    monkeypatch.setenv("HF_TOKEN", wrong)
    result = run("ls", "--repo", REPO)
    assert result.code == 3 and "refused (HTTP 401); check HF_TOKEN" in one_error_line(result.err)
    assert wrong not in result.err


def test_offline_reads_serve_the_newest_commit_every_time(
    run: Run, hub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(run, wheel(tmp_path, "second"))
    online = run("ls", "--repo", REPO)
    assert online.code == 0 and "second" in online.out
    head = hub.head(REPO_ID)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    outputs = {run("ls", "--repo", REPO).out for _ in range(3)}
    assert outputs == {online.out}
    offline = run("ls", "--repo", REPO)
    assert f"HF_HUB_OFFLINE is set; using the cached index of commit {head[:12]} of " in offline.err
    assert " ago (it may be stale)" in offline.err


# --- 6. server text is untrusted ------------------------------------------------------------------


def test_server_text_is_one_short_line_without_the_token(run: Run, hub: LoopHub) -> None:
    hub.echo_credentials("repo_info", times=100)
    result = run("ls", "--repo", REPO)
    assert result.code == 2
    line = one_error_line(result.err)
    assert FAKE_TOKEN not in result.err and "Bearer ***" in line
    assert len(line) <= 1000 and "\x00" not in line


# --- 4. the card is shared ------------------------------------------------------------------------


def test_the_card_keeps_what_people_wrote(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.librarian]\nlicense = "apache-2.0"\n')
    publish(run, wheel(tmp_path), "--create")
    card = loophub.files(REPO_ID)["README.md"].decode()
    assert card.startswith("---\n") and "viewer: false" in card and "license: apache-2.0" in card
    assert "- wheels" in card and "<!-- librarian:begin -->" in card and "<!-- librarian:end -->" in card
    assert card.index("pip install --no-deps") < card.index("uv pip install") < card.index("librarian pull")
    assert "pip install librarian-wheels" not in card
    edited = (
        card.replace("---\n", "---\npretty_name: Our kernels\n", 1).replace(
            "<!-- librarian:begin -->",
            "## Our notes\n\nBuilt nightly by the infra team.\n\n<!-- librarian:begin -->",
        )
        + "\n## Contact\n\nask #infra\n"
    )
    HfApi(endpoint=loophub.url).create_commit(
        REPO_ID,
        [CommitOperationAdd("README.md", edited.encode())],
        commit_message="edit card",
        repo_type="dataset",
    )
    publish(run, wheel(tmp_path, "second"))
    after = loophub.files(REPO_ID)["README.md"].decode()
    for kept in (
        "pretty_name: Our kernels",
        "## Our notes",
        "Built nightly by the infra team.",
        "## Contact\n\nask #infra",
    ):
        assert kept in after
    assert "second" in after.split("<!-- librarian:begin -->")[1]  # the block was brought up to date
    assert after.count("viewer: false") == 1 and after.count("<!-- librarian:begin -->") == 1


# --- 5. one copy, named commits -------------------------------------------------------------------


def test_pull_keeps_one_copy_and_publish_names_its_commit(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    made = run("publish", str(wheel(tmp_path, size=300_000)), *COMBO, "--repo", REPO, "--create", "--json")
    assert made.code == 0, made.err
    commit = json.loads(made.out)["commit"]
    assert commit == f"{loophub.url}/datasets/{REPO_ID}/commit/{loophub.head(REPO_ID)}"
    again = run("publish", str(wheel(tmp_path, "other")), *COMBO, "--repo", REPO)
    assert f"commit {loophub.url}/datasets/{REPO_ID}/commit/{loophub.head(REPO_ID)}" in again.out
    got = run("pull", "tinykern", *PULL, "--repo", REPO, "-o", "out")
    assert got.code == 0, got.err
    pulled = next((tmp_path / "out").glob("*.whl"))
    size = pulled.stat().st_size
    home = tmp_path / "hf-home"
    # the read cache keeps it by sha256 as a hard link of the pulled file where it can: no second copy
    kept = [p for p in home.rglob("*") if p.is_file() and p.stat().st_size == size]
    assert all(p.samefile(pulled) for p in kept) or pulled.stat().st_dev != home.stat().st_dev, kept
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [pulled.name]


# --- 3. gc that frees storage ---------------------------------------------------------------------


def test_gc_purge_frees_the_dropped_wheels_lfs_objects(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    old = wheel(tmp_path, "tinykern", "0.1.0", size=200_000)
    publish(run, old, "--create")
    new = wheel(tmp_path, "tinykern", "0.2.0", size=200_000)
    publish(run, new)
    api = HfApi(endpoint=loophub.url)
    before = {f.file_oid: f for f in api.list_lfs_files(REPO_ID, repo_type="dataset")}
    index = json.loads(loophub.files(REPO_ID)["index/tinykern.json"])
    old_sha = next(w["sha256"] for w in index["wheels"] if "0.1.0" in w["path"])
    assert old_sha in before
    plan = run("gc", "--keep-versions", "1", "--purge", "--purge-grace", "0", "--repo", REPO)
    assert plan.code == 0, plan.err
    assert f"purge  LFS object {old_sha[:12]}" in plan.out and "would be deleted for good" in plan.out
    assert {f.file_oid for f in api.list_lfs_files(REPO_ID, repo_type="dataset")} == set(before)  # plan only
    done = run(
        "gc", "--keep-versions", "1", "--purge", "--purge-grace", "0", "--yes", "--repo", REPO, "--json"
    )
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert [b["sha256"] for b in report["purge"]] == [old_sha] and report["freed"] == before[old_sha].size
    assert report["commit"].endswith(loophub.head(REPO_ID))
    after = {f.file_oid for f in api.list_lfs_files(REPO_ID, repo_type="dataset")}
    assert old_sha not in after and after == set(before) - {old_sha}
    assert run("verify", "--repo", REPO, "--deep").code == 0
    got = run("pull", "tinykern", *PULL, "--repo", REPO, "-o", "out")
    assert got.code == 0 and "0.2.0" in got.out


def test_gc_counts_a_blob_once_and_will_not_empty_a_package_unasked(run: Run, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    twice = wheel(tmp_path, "tinykern", "0.1.0", size=100_000)
    assert (
        run(
            "publish",
            str(twice),
            "--torch",
            "2.8",
            "--cuda",
            "12.8",
            "--sm",
            "86",
            "--sm",
            "89",
            "--trust-sm",
            "--repo",
            store,
        ).code
        == 0
    )
    plan = run("gc", "--drop-torch", "2.8", "--repo", store, "--json")
    report = json.loads(plan.out)
    assert len(report["remove"]) == 2 and report["freed"] == report["remove"][0]["size"]
    assert report["emptied"] == ["tinykern"]
    text = run("gc", "--drop-torch", "2.8", "--repo", store)
    assert "warning: this plan removes every wheel of tinykern; --yes needs --allow-empty" in text.out
    refused = run("gc", "--drop-torch", "2.8", "--repo", store, "--yes")
    assert refused.code == 2 and "--allow-empty" in one_error_line(refused.err)
    assert len(list(Path(store).rglob("*.whl"))) == 2
    done = run("gc", "--drop-torch", "2.8", "--repo", store, "--yes", "--allow-empty")
    assert done.code == 0 and not list(Path(store).rglob("*.whl"))
