"""The Hub at CI scale: a build matrix within the Hub's commit budget (128 commits per hour per repo).

Against the loophub with a per-repo commit limit that answers 429 as huggingface.co does: jobs stage
without commits and one ``reindex --manifest`` commits once; a publish past the limit ends at once
(exit 3) naming the wait; a big change lands in pieces, wheels first and the index last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi

import librarian.stores.hub as hub_module
from tests.builders import make_wheel, torch_extension_so
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO_ID = "team/wheels"
REPO = f"hf://datasets/{REPO_ID}"
FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)
PULL = ("--sm", "89", "--torch", "2.8", "--python", "3.11", "--platform", "linux_x86_64", "--repo", REPO)


def wheels(directory: Path, packages: int, versions: int = 1, prefix: str = "pkg") -> list[str]:
    return [
        str(
            make_wheel(
                directory,
                f"{prefix}{p}",
                f"1.{v}",
                "cp311-cp311-linux_x86_64",
                {f"{prefix}{p}/__init__.py": os.urandom(64), f"{prefix}{p}/_C.so": torch_extension_so()},
            )
        )
        for p in range(packages)
        for v in range(versions)
    ]


def indexed(hub: LoopHub, revision: str = "main") -> set[str]:
    files = hub.files(REPO_ID, revision=revision)
    if "index.json" not in files:
        return set()
    root = json.loads(files["index.json"])
    return {w["path"] for pkg in root["packages"].values() for w in json.loads(files[pkg["shard"]])["wheels"]}


def stored(hub: LoopHub, revision: str = "main") -> set[str]:
    return {p for p in hub.files(REPO_ID, revision=revision) if p.endswith(".whl")}


def history(hub: LoopHub) -> list[tuple[str, str]]:
    """(commit id, title), oldest first."""
    return [
        (c.commit_id, c.title)
        for c in reversed(HfApi(endpoint=hub.url).list_repo_commits(REPO_ID, repo_type="dataset"))
    ]


def test_twelve_jobs_stage_concurrently_and_one_reindex_commits_once(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    loophub.limit_commits(128)
    procs = []
    for job in range(12):
        batch = wheels(tmp_path / f"dist{job}", 2, prefix=f"j{job}p")
        cmd = [
            sys.executable,
            "-m",
            "librarian",
            "publish",
            *batch,
            *FLAGS,
            "--create",
            "--stage",
            "--manifest",
            str(tmp_path / "manifests" / f"job{job}.json"),
        ]
        procs.append(
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        )
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "2 file(s) staged, no commit" in out
    assert loophub.commits_made(REPO_ID) == 0  # the bytes are on the Hub, no job committed
    assert stored(loophub) == set()
    assert loophub.log.count("lfs_upload") == 24

    manifest = json.loads((tmp_path / "manifests/job3.json").read_text())
    assert (
        manifest["kind"] == "librarian-stage-manifest"
        and manifest["repo"] == REPO
        and manifest["revision"] == "main"
    )
    assert len(manifest["planned_against"]) == 40 and len(manifest["blobs"]) == 2
    assert {w["path"].split("/")[0] for w in manifest["wheels"]} == {"j3p0", "j3p1"}
    assert all({"sha256", "size", "cell", "facts"} <= set(w) for w in manifest["wheels"])

    manifests = [str(tmp_path / "manifests" / f"job{job}.json") for job in range(12)]
    done = run("reindex", "--repo", REPO, *[a for m in manifests for a in ("--manifest", m)])
    assert done.code == 0, done.err
    assert "merged 24 staged wheel(s), from 12 manifest(s)" in done.out and "commit http" in done.out
    assert loophub.commits_made(REPO_ID) == 1  # within 4 commits in all: one
    assert indexed(loophub) == stored(loophub) and len(stored(loophub)) == 24
    assert loophub.log.count("lfs_upload") == 24  # nothing uploaded twice
    assert run("verify", "--repo", REPO).code == 0
    got = run("pull", "j7p1", *PULL, "-o", "out")
    assert got.code == 0, got.err

    again = run(
        "reindex", "--repo", REPO, "--manifest", manifests[0]
    )  # the same bytes at the same path: skipped
    assert again.code == 0 and "nothing to reindex" in again.out
    assert loophub.commits_made(REPO_ID) == 1


def test_reindex_manifest_refuses_other_bytes_and_drops_what_is_not_there(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    (first,) = wheels(tmp_path / "a", 1)
    assert run("publish", first, *FLAGS, "--create").code == 0
    (second,) = wheels(tmp_path / "b", 1)  # same name, other bytes
    assert run("publish", second, *FLAGS, "--stage", "--manifest", "m/b.json", "--replace").code == 0
    refused = run("reindex", "--repo", REPO, "--manifest", "m/b.json")
    assert (
        refused.code == 2 and "already stored with other bytes" in refused.err and "--replace" in refused.err
    )
    replaced = run("reindex", "--repo", REPO, "--manifest", "m/b.json", "--replace")
    assert replaced.code == 0, replaced.err
    assert run("verify", "--repo", REPO).code == 0

    (lost,) = wheels(tmp_path / "c", 1, prefix="lost")
    assert run("publish", lost, *FLAGS, "--stage", "--manifest", "m/c.json").code == 0
    data = json.loads((tmp_path / "m/c.json").read_text())
    data["wheels"][0]["sha256"] = "0" * 64  # a blob the Hub does not hold
    (tmp_path / "m/d.json").write_text(json.dumps(data))
    partial = run("reindex", "--repo", REPO, "--manifest", "m/d.json")
    assert partial.code == 1 and "does not hold its bytes" in partial.out

    other = dict(data, repo="hf://datasets/team/other")
    (tmp_path / "m/e.json").write_text(json.dumps(other))
    wrong = run("reindex", "--repo", REPO, "--manifest", "m/e.json")
    assert wrong.code == 2 and "staged for hf://datasets/team/other" in wrong.err
    assert run("publish", lost, *FLAGS, "--manifest", "m/x.json").code == 2  # --manifest goes with --stage


def test_a_publish_past_the_commit_limit_exits_3_at_once_naming_the_wait(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    assert run("publish", *wheels(tmp_path / "seed", 1, prefix="seed"), *FLAGS, "--create").code == 0
    loophub.limit_commits(1)  # the seed's commit used the hour's budget
    loophub.log.clear()
    batch = wheels(tmp_path / "d", 3)
    start = time.monotonic()
    result = run("publish", *batch, *FLAGS)
    took = time.monotonic() - start
    assert result.code == 3, result.err
    assert took < 60  # needs ~1 s; waiting the limit out would take an hour
    line = result.err.strip()
    assert "\n" not in line and line.startswith(f"librarian: error: {REPO}: the Hub refuses more commits")
    assert "You have exceeded the rate limit for repository commits (1 per hour)" in line
    assert "retry in 60 min" in line and "--stage --manifest" in line
    assert loophub.log.count("commit") == 1  # asked once, not retried like a conflict
    uploaded = loophub.log.count("lfs_upload")
    assert uploaded == 3

    loophub.limit_commits(None)
    again = run("publish", *batch, *FLAGS)
    assert again.code == 0, again.err
    assert loophub.log.count("lfs_upload") == uploaded  # the bytes from the refused run were kept
    assert indexed(loophub) == stored(loophub) and len(stored(loophub)) == 4


def test_a_short_rate_limit_is_waited_out(run: Run, loophub: LoopHub, tmp_path: Path) -> None:
    assert run("publish", *wheels(tmp_path / "seed", 1, prefix="seed"), *FLAGS, "--create").code == 0
    loophub.limit_commits(1, window_s=2)
    result = run("publish", *wheels(tmp_path / "d", 2), *FLAGS)
    assert result.code == 0, result.err
    assert any(r.status == 429 for r in loophub.log.select("commit"))
    assert indexed(loophub) == stored(loophub) and len(stored(loophub)) == 3


def test_a_rate_limit_longer_than_the_bound_is_not_waited(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run("publish", *wheels(tmp_path / "seed", 1, prefix="seed"), *FLAGS, "--create").code == 0
    loophub.limit_commits(1, window_s=30)
    monkeypatch.setenv("LIBRARIAN_HUB_MAX_WAIT", "5")
    result = run("publish", *wheels(tmp_path / "d", 1), *FLAGS)
    assert result.code == 3 and "retry in 30 s" in result.err


@pytest.fixture
def small_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 operations: 10 wheels, each with its PEP 658 METADATA file beside it (the real bound is 100
    # operations; 15 wheels in pieces of 10 take the same paths as 150 in pieces of 100, at a tenth of the cost)
    monkeypatch.setenv("LIBRARIAN_HUB_COMMIT_OPS", "20")
    monkeypatch.setattr(hub_module, "MAX_ATTEMPTS", 2)


def test_a_15_wheel_publish_lands_in_pieces_index_last(
    run: Run, loophub: LoopHub, tmp_path: Path, small_commits: None
) -> None:
    batch = wheels(tmp_path / "d", 3, versions=5)
    result = run("publish", *batch, *FLAGS, "--create")
    assert result.code == 0, result.err
    commits = history(loophub)[1:]  # after the repo's initial commit
    assert [t.rsplit("(", 1)[-1] for _, t in commits] == ["part 1 of 2)", "part 2 of 2)"]
    first, last = commits[0][0], commits[1][0]
    assert (
        len(stored(loophub, first)) == 10 and indexed(loophub, first) == set()
    )  # wheels first, no index yet
    assert indexed(loophub, last) == stored(loophub, last) and len(stored(loophub, last)) == 15
    assert run("verify", "--repo", REPO).code == 0


def test_a_fault_between_pieces_leaves_extra_files_that_adopt_or_the_next_publish_repairs(
    run: Run, loophub: LoopHub, tmp_path: Path, small_commits: None
) -> None:
    batch = wheels(tmp_path / "d", 3, versions=5)
    assert run("publish", *wheels(tmp_path / "seed", 1, prefix="seed"), *FLAGS, "--create").code == 0
    loophub.fail("commit", times=100, status=503, skip=1)  # the first piece lands, then the Hub fails
    failed = run("publish", *batch, *FLAGS)
    assert failed.code == 3, failed.err
    assert len(stored(loophub)) == 11 and len(indexed(loophub)) == 1  # extra files, never a dangling entry
    loophub.clear_faults()
    report = run("verify", "--repo", REPO)
    assert report.code == 1 and report.out.count("not in the index") == 10

    adopted = run("reindex", "--repo", REPO, "--adopt")
    assert adopted.code == 0, adopted.out
    assert run("verify", "--repo", REPO).code == 0

    uploads = loophub.log.count("lfs_upload")
    rest = run("publish", *batch, *FLAGS)  # the next publish files the other 5; the adopted 10 are skipped
    assert rest.code == 0, rest.err
    assert (
        uploads == 16 and loophub.log.count("lfs_upload") == uploads
    )  # the failed run's bytes are not sent again
    assert indexed(loophub) == stored(loophub) and len(stored(loophub)) == 16
    assert run("verify", "--repo", REPO).code == 0


def test_the_next_publish_after_a_fault_between_pieces_sends_only_the_rest(
    run: Run, loophub: LoopHub, tmp_path: Path, small_commits: None
) -> None:
    batch = wheels(tmp_path / "d", 3, versions=5)
    assert run("publish", *wheels(tmp_path / "seed", 1, prefix="seed"), *FLAGS, "--create").code == 0
    loophub.fail("commit", times=100, status=400, skip=1)
    assert run("publish", *batch, *FLAGS).code == 2
    loophub.clear_faults()
    before = loophub.commits_made(REPO_ID)
    again = run("publish", *batch, *FLAGS)
    assert again.code == 0, again.err
    assert loophub.commits_made(REPO_ID) == before + 1  # the 10 already there: one commit of 5 and the index
    assert indexed(loophub) == stored(loophub) and len(stored(loophub)) == 16


def test_local_store_stages_files_and_a_manifest(run: Run, tmp_path: Path) -> None:
    batch = wheels(tmp_path / "d", 2)
    staged = run(
        "publish", *batch, "--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--stage", "--manifest", "m.json"
    )
    assert staged.code == 0, staged.err
    assert not (tmp_path / "wheelhouse/index.json").exists()
    assert len(list((tmp_path / "wheelhouse").rglob("*.whl"))) == 2
    done = run("reindex", "--manifest", "m.json")
    assert done.code == 0, done.err
    assert "merged 2 staged wheel(s), from 1 manifest(s)" in done.out
    assert run("verify").code == 0


def test_ls_counts_the_store_files_against_the_guidance_and_gc_says_what_it_frees(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import librarian.ops.store.ls as ls_module

    combo = ("--sm", "89", "--cuda", "12.8")
    assert run("publish", *wheels(tmp_path / "a", 2), *combo, "--torch", "2.8").code == 0
    assert run("publish", *wheels(tmp_path / "b", 1, prefix="old"), *combo, "--torch", "2.7").code == 0
    listed = json.loads(run("ls", "--json").out)
    # 3 wheels and their 3 METADATA files, 3 shards, 2 pages (one per sm and combo), each with a PEP 503 root
    # and 3 project pages, the root index
    assert listed["files"] == {"count": 20, "guidance": 100_000, "share": 0.0002, "warning": False}
    assert "files" not in json.loads(run("ls", "pkg0", "--json").out)  # part of the index: no count

    monkeypatch.setattr(ls_module, "FILE_GUIDANCE", 10)
    warned = run("ls", "--json")
    assert json.loads(warned.out)["files"]["warning"] is True
    assert "20 files, 200% of the Hub's guidance of 10 files per repo" in warned.err

    plan = run("gc", "--drop-torch", "2.7")
    # the wheel and its METADATA file, its shard, its page and that page's PEP 503 tree (root and 3
    # projects), and old0's project folder in the torch 2.8 page's tree (a project folder is there for every
    # package filed for that GPU)
    assert "9 file(s) in all, pages and shards included" in plan.out
    done = json.loads(run("gc", "--drop-torch", "2.7", "--yes", "--allow-empty", "--json").out)
    assert done["files_freed"] == 9
    assert json.loads(run("ls", "--json").out)["files"]["count"] == 11


def test_rate_limit_wait_reads_retry_after_then_the_hubs_words() -> None:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    from librarian.stores.hub_http import rate_limit_wait

    def error(headers: dict[str, str], message: str = "") -> HfHubHTTPError:
        response = httpx2.Response(429, headers=headers, request=httpx2.Request("POST", "http://hub/api/x"))
        e = HfHubHTTPError("429", response=response)
        e.server_message = message
        return e

    assert rate_limit_wait(error({"Retry-After": "2580"})) == 2580
    assert rate_limit_wait(error({"ratelimit": '"api";r=0;t=55'})) == 55
    words = "You have exceeded the rate limit for repository commits (128 per hour). You can retry this action in 43 minutes."
    assert rate_limit_wait(error({}, words)) == 43 * 60
    assert rate_limit_wait(error({}, "slow down")) is None


def test_manifests_merge_once_and_refuse_two_byte_strings_at_one_path(tmp_path: Path) -> None:
    from librarian.errors import BadInput
    from librarian.index import IndexEntry
    from librarian.manifest import Manifest, merge_manifests, parse_manifest, render_manifest

    def entry(sha: str) -> IndexEntry:
        data = {
            "path": "pkg/sm89/torch2.8-cu128/pkg-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl",
            "sha256": sha,
            "size": 10,
            "cell": {"package": "pkg", "sm": "sm_89", "torch": "2.8", "cuda": "12.8"},
        }
        return IndexEntry.from_json(data, "test")

    one = Manifest(REPO, "main", "a" * 40, "now", (entry("1" * 64),))
    back = parse_manifest(render_manifest(one), "m.json")
    assert back == one
    assert merge_manifests([("a", one), ("b", back)]) == one.entries
    other = Manifest(REPO, "main", None, "now", (entry("2" * 64),))
    with pytest.raises(BadInput, match="staged with other bytes by a and c"):
        merge_manifests([("a", one), ("c", other)])
    with pytest.raises(BadInput, match="not a stage manifest"):
        parse_manifest(b'{"schema": 1}', "x.json")


def test_a_big_gc_drops_the_entries_first_and_the_files_after(
    run: Run, loophub: LoopHub, tmp_path: Path, small_commits: None
) -> None:
    old = wheels(tmp_path / "old", 3, versions=5, prefix="old")
    assert (
        run(
            "publish", *old, "--sm", "89", "--torch", "2.7", "--cuda", "12.8", "--repo", REPO, "--create"
        ).code
        == 0
    )
    assert run("publish", *wheels(tmp_path / "new", 1), *FLAGS).code == 0
    before = len(history(loophub))
    result = run("gc", "--drop-torch", "2.7", "--yes", "--allow-empty", "--repo", REPO)
    assert result.code == 0, result.err
    commits = history(loophub)[before:]
    assert len(commits) == 3 and "part 1 of 3" in commits[0][1]  # wheels' deletions, pages and PEP 503 trees
    first = commits[0][0]
    assert (
        len(indexed(loophub, first)) == 1 and len(stored(loophub, first)) > 1
    )  # the index first: extra files only
    assert indexed(loophub) == stored(loophub) and len(stored(loophub)) == 1
    assert run("verify", "--repo", REPO).code == 0


def test_pieces_put_wheels_first_the_index_whole_and_deletions_last() -> None:
    from librarian.stores.pieces import plan_pieces

    def sizes(adds: int, catalogue: int, deletes: int) -> list[tuple[int, int, int]]:
        pieces = plan_pieces(
            [("a", i) for i in range(adds)],
            [("c", i) for i in range(catalogue)],
            [("d", i) for i in range(deletes)],
            100,
        )
        return [tuple(sum(1 for k, _ in p if k == kind) for kind in "acd") for p in pieces]  # type: ignore[misc]

    assert sizes(24, 27, 0) == [(24, 27, 0)]  # fits: one commit
    assert sizes(150, 18, 0) == [(100, 0, 0), (50, 18, 0)]
    assert sizes(128, 131, 0) == [(100, 0, 0), (28, 0, 0), (0, 131, 0)]  # the index is never split
    assert sizes(0, 18, 120) == [(0, 18, 82), (0, 0, 38)]
    assert sizes(0, 0, 0) == []
