"""The loopback hub against the real huggingface_hub 2.4.0 client, over real HTTP on 127.0.0.1.

These tests also pin down what the client does on each fault, which the Hub store relies on.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
    HfApi,
    HfFileSystem,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tests.loophub import LoopHub
from tests.loophub.control import RemoteControl
from tests.loophub.storage import Repo, Storage

# The `loophub` and `make_loophub` fixtures come from tests.loophub.fixtures, registered in conftest.py.

REPO = "owner/wheels"
WHL = "flash_attn/sm90/torch2.8-cu128/flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl"


def wheel_bytes(size: int = 200_000, seed: bytes = b"w") -> bytes:
    """Bytes that look like a zip (PK header) and are not all text."""
    body = hashlib.sha256(seed).digest() * (size // 32 + 1)
    return (b"PK\x03\x04" + body)[:size]


@pytest.fixture
def api(loophub: LoopHub) -> HfApi:
    hf = HfApi(endpoint=loophub.url)
    hf.create_repo(REPO, repo_type="dataset")
    return hf


def publish(api: HfApi, files: dict[str, bytes], parent: str | None = None, msg: str = "publish") -> str:
    ops = [CommitOperationAdd(path, data) for path, data in files.items()]
    return api.create_commit(REPO, ops, commit_message=msg, repo_type="dataset", parent_commit=parent).oid


# -- repos and errors ---------------------------------------------------------------------------------
def test_a_new_repo_is_seen_only_with_its_initial_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Readers do not take the storage lock: a repo seen before its main branch exists made a concurrent
    # `publish --create` read "no revision 'main'", which the Hub never answers for a repo it lists.
    storage = Storage(tmp_path)
    seen_while_committing: list[bool] = []
    append = storage._append_commit

    def watching(repo: Repo, *args: object, **kwargs: object) -> object:
        seen_while_committing.append((repo.type, repo.id) in storage.repos)
        return append(repo, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage, "_append_commit", watching)
    repo = storage.create_repo("dataset", REPO, private=False, author="me")
    assert seen_while_committing == [False]
    assert storage.get("dataset", REPO) is repo and "main" in repo.branches


def test_create_repo_conflict_and_exist_ok(loophub: LoopHub) -> None:
    hf = HfApi(endpoint=loophub.url)
    url = hf.create_repo(REPO, repo_type="dataset")
    assert url.repo_id == REPO and url.repo_type == "dataset"
    with pytest.raises(HfHubHTTPError) as exc:
        hf.create_repo(REPO, repo_type="dataset")
    assert exc.value.response.status_code == 409
    assert hf.create_repo(REPO, repo_type="dataset", exist_ok=True).repo_id == REPO
    info = hf.dataset_info(REPO)
    assert info.sha == loophub.head(REPO) and [s.rfilename for s in info.siblings or []] == [".gitattributes"]
    # Model repos work too, on their own URL scheme.
    hf.create_repo("owner/model")
    hf.upload_file(path_or_fileobj=b"hi", path_in_repo="x.txt", repo_id="owner/model")
    assert Path(hf.hf_hub_download("owner/model", "x.txt")).read_bytes() == b"hi"


def test_not_found_errors_map_to_typed_exceptions(api: HfApi) -> None:
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("owner/missing")
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(REPO, revision="no-such-branch")
    with pytest.raises(RemoteEntryNotFoundError) as exc:
        api.hf_hub_download(REPO, "nope.json", repo_type="dataset")
    assert isinstance(exc.value, EntryNotFoundError)
    with pytest.raises(RevisionNotFoundError):
        api.hf_hub_download(REPO, ".gitattributes", repo_type="dataset", revision="nope")
    with pytest.raises(RepositoryNotFoundError):
        api.hf_hub_download("owner/missing", "x", repo_type="dataset")
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree(REPO, path_in_repo="no/dir", repo_type="dataset"))


def test_wrong_token_is_refused_and_token_never_in_urls(loophub: LoopHub) -> None:
    with pytest.raises(HfHubHTTPError) as exc:
        HfApi(endpoint=loophub.url, token="hf_wrong").create_repo(REPO, repo_type="dataset")
    assert exc.value.response.status_code == 401
    hf = HfApi(endpoint=loophub.url)
    hf.create_repo(REPO, repo_type="dataset")
    hf.upload_file(path_or_fileobj=wheel_bytes(), path_in_repo=WHL, repo_id=REPO, repo_type="dataset")
    assert loophub.token_leaks == []
    httpx2.get(f"{loophub.url}/api/datasets/{REPO}?token={os.environ['HF_TOKEN']}")
    assert len(loophub.token_leaks) == 1


# -- commits ------------------------------------------------------------------------------------------
def test_commit_regular_and_lfs_files(api: HfApi, loophub: LoopHub) -> None:
    head = loophub.head(REPO)
    whl = wheel_bytes()
    oid = publish(api, {"index.json": b'{"schema": 1}\n', WHL: whl}, parent=head)
    assert loophub.head(REPO) == oid
    assert loophub.files(REPO)[WHL] == whl
    assert loophub.log.count("lfs_upload") == 1 and loophub.log.count("lfs_verify") == 1
    by_path = {e.path: e for e in api.get_paths_info(REPO, ["index.json", WHL], repo_type="dataset")}
    assert by_path["index.json"].lfs is None  # type: ignore[union-attr]
    assert by_path[WHL].lfs.sha256 == hashlib.sha256(whl).hexdigest()  # type: ignore[union-attr]
    # Re-adding identical content: preupload reports the same oid, the client skips the commit.
    assert publish(api, {WHL: whl, "index.json": b'{"schema": 1}\n'}) == oid
    assert loophub.log.count("commit") == 1 and loophub.log.count("lfs_upload") == 1
    # A second path with the same bytes: the LFS batch says "already stored", no upload.
    publish(api, {WHL.replace("sm90", "sm89"): whl})
    assert loophub.log.count("lfs_upload") == 1


def test_copy_and_delete(api: HfApi, loophub: LoopHub) -> None:
    publish(api, {"a/index.json": b"{}", "a/b/" + WHL: wheel_bytes(), "README.md": b"---\n---\n# wheels\n"})
    api.create_commit(
        REPO,
        [
            CommitOperationCopy("a/b/" + WHL, "c/" + WHL),
            CommitOperationCopy("a/index.json", "c/index.json"),
        ],
        commit_message="copy",
        repo_type="dataset",
    )
    api.create_commit(
        REPO,
        [CommitOperationDelete("a/index.json"), CommitOperationDelete("a/")],
        commit_message="delete",
        repo_type="dataset",
    )
    assert sorted(loophub.files(REPO)) == [".gitattributes", "README.md", "c/" + WHL, "c/index.json"]
    assert loophub.log.count("validate_yaml") == 1  # a README.md in a commit is checked first
    with pytest.raises(RemoteEntryNotFoundError):
        api.create_commit(REPO, [CommitOperationDelete("gone.txt")], commit_message="x", repo_type="dataset")


def test_stale_parent_commit_gets_412(api: HfApi, loophub: LoopHub) -> None:
    base = loophub.head(REPO)
    publish(api, {"one.txt": b"1"}, parent=base)
    with pytest.raises(HfHubHTTPError) as exc:
        publish(api, {"two.txt": b"2"}, parent=base)
    assert type(exc.value) is HfHubHTTPError and exc.value.response.status_code == 412
    assert exc.value.server_message == "A commit has happened since. Please refresh and try again."


def test_concurrent_commit_lands_between_plan_and_commit(api: HfApi, loophub: LoopHub) -> None:
    head = loophub.head(REPO)
    loophub.land_concurrent_commit(REPO, {"other.txt": b"theirs"})
    with pytest.raises(HfHubHTTPError) as exc:
        publish(api, {"mine.txt": b"mine"}, parent=head)
    assert exc.value.response.status_code == 412
    assert sorted(loophub.files(REPO)) == [".gitattributes", "other.txt"]
    new_head = api.dataset_info(REPO).sha
    assert new_head != head
    publish(api, {"mine.txt": b"mine"}, parent=new_head)  # the retry, re-planned on the new head
    assert sorted(loophub.files(REPO)) == [".gitattributes", "mine.txt", "other.txt"]


def test_branches_and_commit_shas_resolve(api: HfApi, loophub: LoopHub) -> None:
    first = publish(api, {"v.txt": b"1"})
    api.create_branch(REPO, branch="dev", repo_type="dataset")
    api.create_commit(
        REPO, [CommitOperationAdd("v.txt", b"2")], commit_message="dev", repo_type="dataset", revision="dev"
    )
    assert loophub.files(REPO)["v.txt"] == b"1" and loophub.files(REPO, revision="dev")["v.txt"] == b"2"
    assert Path(hf_hub_download(REPO, "v.txt", repo_type="dataset", revision="dev")).read_bytes() == b"2"
    assert api.dataset_info(REPO, revision=first[:10]).sha == first
    assert [b.name for b in api.list_repo_refs(REPO, repo_type="dataset").branches] == ["dev", "main"]
    api.delete_branch(REPO, branch="dev", repo_type="dataset")
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(REPO, revision="dev")


# -- listings -----------------------------------------------------------------------------------------
def test_tree_paths_info_and_commits_paginate(api: HfApi, loophub: LoopHub) -> None:
    loophub.config.page_size = 2
    files = {f"pkg{i % 2}/sm{80 + i}/f{i}.json": b"{}" for i in range(7)}
    publish(api, files, msg="first")
    publish(api, {"pkg0/extra.json": b"[]"}, msg="second")
    loophub.log.clear()
    entries = list(api.list_repo_tree(REPO, repo_type="dataset", recursive=True))
    paths = {e.path for e in entries}
    assert {*files, "pkg0/extra.json", "pkg0", "pkg1", ".gitattributes"} <= paths
    assert loophub.log.count("tree") == -(-len(entries) // 2)
    top = list(api.list_repo_tree(REPO, path_in_repo="pkg0", repo_type="dataset", expand=True))
    assert {e.path for e in top} == {"pkg0/extra.json", "pkg0/sm80", "pkg0/sm82", "pkg0/sm84", "pkg0/sm86"}
    assert next(e for e in top if e.path == "pkg0/extra.json").last_commit.title == "second"  # type: ignore[union-attr]
    info = api.get_paths_info(REPO, ["pkg1", "pkg0/extra.json", "missing"], repo_type="dataset")
    assert sorted(e.path for e in info) == ["pkg0/extra.json", "pkg1"]
    commits = api.list_repo_commits(REPO, repo_type="dataset")
    assert [c.title for c in commits] == ["second", "first", "initial commit"]
    assert loophub.log.count("commits") == 2


# -- downloads ----------------------------------------------------------------------------------------
def test_download_then_cache(api: HfApi, loophub: LoopHub) -> None:
    whl = wheel_bytes(300_000)
    sha = publish(api, {WHL: whl, "index.json": b"{}", "other.json": b"[]"})
    loophub.log.clear()
    assert Path(hf_hub_download(REPO, WHL, repo_type="dataset")).read_bytes() == whl
    assert Path(hf_hub_download(REPO, "index.json", repo_type="dataset")).read_bytes() == b"{}"
    assert loophub.log.downloaded() == [WHL, "index.json"]
    assert loophub.log.bytes_served("resolve") == len(whl) + 2
    # Again by branch: a HEAD only. By full commit sha: no request at all.
    hf_hub_download(REPO, WHL, repo_type="dataset")
    hf_hub_download(REPO, WHL, repo_type="dataset", revision=sha)
    assert loophub.log.count("resolve", "GET") == 2 and loophub.log.count("resolve", "HEAD") == 3
    snap = snapshot_download(REPO, repo_type="dataset")
    assert (Path(snap) / "other.json").read_bytes() == b"[]"


def test_range_reads(api: HfApi, loophub: LoopHub) -> None:
    whl = wheel_bytes(5000)
    publish(api, {WHL: whl})
    url = f"{loophub.url}/datasets/{REPO}/resolve/main/{WHL}"
    r = httpx2.get(url, headers={"Range": "bytes=10-19"})
    assert (
        r.status_code == 206 and r.content == whl[10:20] and r.headers["Content-Range"] == "bytes 10-19/5000"
    )
    assert httpx2.get(url, headers={"Range": "bytes=-5"}).content == whl[-5:]
    assert httpx2.get(url, headers={"Range": "bytes=9000-"}).status_code == 416
    fs = HfFileSystem(endpoint=loophub.url, skip_instance_cache=True)
    with fs.open(f"datasets/{REPO}/{WHL}", "rb", block_size=1024) as f:
        f.seek(4000)
        assert f.read(100) == whl[4000:4100]


def test_cross_origin_lfs_redirect(make_loophub: Callable[..., LoopHub]) -> None:
    hub = make_loophub(lfs_redirect="cross")
    hf = HfApi(endpoint=hub.url)
    hf.create_repo(REPO, repo_type="dataset")
    whl = wheel_bytes()
    publish(hf, {WHL: whl})
    assert Path(hf.hf_hub_download(REPO, WHL, repo_type="dataset")).read_bytes() == whl
    assert hub.log.count("lfs_download", "GET") == 1


def test_multipart_lfs_upload(make_loophub: Callable[..., LoopHub]) -> None:
    hub = make_loophub(multipart_chunk_size=100_000)
    hf = HfApi(endpoint=hub.url)
    hf.create_repo(REPO, repo_type="dataset")
    whl = wheel_bytes(250_000)
    publish(hf, {WHL: whl})
    assert hub.log.count("lfs_part") == 3 and hub.log.count("lfs_complete") == 1
    assert hub.files(REPO)[WHL] == whl


# -- faults: what the client retries and what it raises -----------------------------------------------
def test_client_retries_5xx_and_429_on_preupload_lfs_and_tree(api: HfApi, loophub: LoopHub) -> None:
    loophub.fail("preupload", times=1, status=503)
    loophub.rate_limit("lfs_batch", times=1, retry_after=0)
    loophub.drop("lfs_upload", phase="request", after_bytes=1000)  # mid-upload
    publish(api, {WHL: wheel_bytes()})
    loophub.fail("tree", times=1, status=500)
    assert WHL in {e.path for e in api.list_repo_tree(REPO, repo_type="dataset", recursive=True)}
    assert loophub.plan.pending() == []
    assert loophub.log.count("preupload") == 2 and loophub.log.count("lfs_upload") == 2


def test_client_does_not_retry_commit_repo_info_or_paths_info(api: HfApi, loophub: LoopHub) -> None:
    head = loophub.head(REPO)
    loophub.fail("commit", status=503)
    with pytest.raises(HfHubHTTPError) as exc:
        publish(api, {"a.txt": b"a"})
    assert exc.value.response.status_code == 503 and loophub.head(REPO) == head
    loophub.fail("repo_info", status=502)
    with pytest.raises(HfHubHTTPError):
        api.dataset_info(REPO)
    loophub.rate_limit("paths_info", retry_after=0)
    with pytest.raises(HfHubHTTPError) as exc:
        api.get_paths_info(REPO, ["a.txt"], repo_type="dataset")
    assert exc.value.response.status_code == 429


def test_lost_commit_response_still_lands(api: HfApi, loophub: LoopHub) -> None:
    head = loophub.head(REPO)
    loophub.lose_response("commit")
    with pytest.raises(httpx2.RemoteProtocolError):
        publish(api, {"a.txt": b"a"}, parent=head)
    titles = [c.title for c in api.list_repo_commits(REPO, repo_type="dataset")]
    assert titles == ["publish", "initial commit"]
    landed = loophub.head(REPO)
    # A blind retry of the same files never reaches the commit endpoint: preupload reports the same
    # oids, the client drops every op as a no-op and returns the branch head, parent_commit unchecked.
    assert publish(api, {"a.txt": b"a"}, parent=head) == landed
    assert loophub.log.count("commit") == 1
    # Anything that differs does reach it, and meets the 412.
    with pytest.raises(HfHubHTTPError) as exc:
        publish(api, {"a.txt": b"a", "b.txt": b"b"}, parent=head)
    assert exc.value.response.status_code == 412


def test_commit_dropped_before_it_is_read_does_not_land(api: HfApi, loophub: LoopHub) -> None:
    head = loophub.head(REPO)
    loophub.drop("commit", phase="request", after_bytes=0)
    with pytest.raises(httpx2.TransportError):
        publish(api, {"a.txt": b"a"}, parent=head)
    assert loophub.head(REPO) == head


def test_download_survives_head_5xx_and_midstream_drop(
    api: HfApi, loophub: LoopHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    whl = wheel_bytes(300_000)
    publish(api, {WHL: whl})
    loophub.fail("resolve", method="HEAD", status=503)  # first HEAD has no retry; then it retries
    loophub.drop("resolve", method="GET", after_bytes=100_000)
    # The client resumes with Range from the last whole chunk it wrote (10 MiB chunks by default).
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 65_536)
    assert Path(hf_hub_download(REPO, WHL, repo_type="dataset")).read_bytes() == whl
    gets = loophub.log.select("resolve", "GET")
    assert [r.status for r in gets] == [200, 206] and gets[1].bytes_sent == len(whl) - 65_536
    # With the file cached, a failing HEAD silently returns the cached copy.
    loophub.fail("resolve", method="HEAD", status=500)
    assert Path(hf_hub_download(REPO, WHL, repo_type="dataset")).read_bytes() == whl


def test_head_5xx_burst_without_cache_gives_local_entry_not_found(
    api: HfApi, loophub: LoopHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "huggingface_hub.utils._http.time.sleep", lambda s: None
    )  # skip the 1+2+4+8+8 s of backoff
    publish(api, {"index.json": b"{}"})
    loophub.fail("resolve", method="HEAD", times=10, status=503)
    with pytest.raises(LocalEntryNotFoundError):
        hf_hub_download(REPO, "index.json", repo_type="dataset")
    assert loophub.log.count("resolve", "HEAD") == 7  # 1 plain try, then 1 + 5 retries


def test_slow_responses(
    api: HfApi, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loophub.delay("tree", 0.3)
    start = time.monotonic()
    list(api.list_repo_tree(REPO, repo_type="dataset"))
    assert time.monotonic() - start >= 0.3
    # A commit slower than the client's timeout: the client raises, the commit lands anyway.
    from tests.loophub.fixtures import point_client_at

    point_client_at(loophub.url, tmp_path / "hf-home", monkeypatch, client_timeout=0.5)
    loophub.delay("commit", 1.0)
    with pytest.raises(httpx2.ReadTimeout):
        publish(api, {"slow.txt": b"s"})
    time.sleep(0.8)
    assert "slow.txt" in loophub.files(REPO)


def test_remote_control_over_http(api: HfApi, loophub: LoopHub) -> None:
    ctl = RemoteControl(loophub.url)
    ctl.add_fault("status", endpoint="repo_info", status=500)
    assert len(ctl.pending_faults()) == 1
    with pytest.raises(HfHubHTTPError):
        api.dataset_info(REPO)
    ctl.land_concurrent_commit(REPO, {"x.txt": b"x"})
    with pytest.raises(HfHubHTTPError):
        publish(api, {"y.txt": b"y"}, parent=loophub.head(REPO))
    stats = ctl.stats()
    assert [r["status"] for r in stats["records"] if r["endpoint"] == "commit"] == [412]
    ctl.configure(page_size=1)
    assert len(list(api.list_repo_tree(REPO, repo_type="dataset"))) == loophub.log.count("tree") == 2
    ctl.reset_stats()
    assert ctl.stats()["records"] == []


# -- the server itself --------------------------------------------------------------------------------
def test_state_survives_restart(make_loophub: Callable[..., LoopHub]) -> None:
    hub = make_loophub()
    hf = HfApi(endpoint=hub.url)
    hf.create_repo(REPO, repo_type="dataset")
    hf.create_repo("owner/gone", repo_type="dataset")
    hf.delete_repo("owner/gone", repo_type="dataset")
    first = hub.head(REPO)
    hub.stop()
    with LoopHub(hub.storage.root) as again:
        assert again.head(REPO) == first and again.files(REPO).keys() == {".gitattributes"}
        assert list(again.storage.repos) == [("dataset", REPO)]


# A launcher that ignores SIGINT, then execs the server: an ignored signal survives exec, as it does for
# the children of `cmd &` in a non-interactive shell (CI, a backgrounded pytest).
SIGINT_IGNORED = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


@pytest.mark.parametrize(
    ("stop", "launcher"),
    [(signal.SIGINT, ()), (signal.SIGTERM, ()), (signal.SIGINT, ("-c", SIGINT_IGNORED))],
    ids=["ctrl-c", "sigterm", "ctrl-c-with-sigint-ignored"],
)
def test_runs_as_a_module(tmp_path: Path, stop: signal.Signals, launcher: tuple[str, ...]) -> None:
    proc = subprocess.Popen(
        [sys.executable, *launcher, "-m", "tests.loophub", "--port", "0", "--root", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        assert RemoteControl(url).add_fault("delay", delay_s=0.0)["kind"] == "delay"
        proc.send_signal(stop)
        # A stop takes about 0.1 s; the bound is only there so that a regression fails instead of hanging.
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:  # never leave a server behind, whatever failed above
            proc.kill()
            proc.wait()


def test_commit_limit_answers_429_in_the_hubs_words_and_preuploaded_blobs_stay(
    api: HfApi, loophub: LoopHub
) -> None:
    loophub.limit_commits(1)
    api.create_commit(REPO, [CommitOperationAdd("a.txt", b"a\n")], commit_message="one", repo_type="dataset")
    blob = os.urandom(2048)
    add = CommitOperationAdd("w.bin", blob)
    api.preupload_lfs_files(REPO, [add], repo_type="dataset")  # the bytes go up without a commit
    assert loophub.commits_made(REPO) == 1 and loophub.log.count("lfs_upload") == 1
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(REPO, [add], commit_message="two", repo_type="dataset")
    response = caught.value.response
    assert response is not None and response.status_code == 429
    assert 3500 < int(response.headers["Retry-After"]) <= 3600
    assert caught.value.server_message.startswith(
        "You have exceeded the rate limit for repository commits (1 per hour). "
        "You can retry this action in 60 minutes."
    )
    loophub.limit_commits(None)
    again = CommitOperationAdd("w.bin", blob)
    api.create_commit(REPO, [again], commit_message="two", repo_type="dataset")
    assert loophub.log.count("lfs_upload") == 1 and loophub.commits_made(REPO) == 2
