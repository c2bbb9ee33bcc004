"""Fan-in publishing: many ``publish --stage`` jobs, one ``reindex``, on a local store and on the loophub."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from librarian.pending import PENDING_DIR, parse_pending_path
from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO_ID = "team/wheels"
HUB = f"hf://datasets/{REPO_ID}"
COMBO = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8")
PULL = ("--sm", "89", "--torch", "2.8", "--python", "3.11", "--platform", "linux_x86_64")


def job_wheels(directory: Path, job: int, count: int = 2) -> list[str]:
    """The wheels one CI job built: packages of its own, random bytes so no two jobs share a file."""
    return [
        str(
            make_wheel(
                directory / f"job{job}",
                f"j{job}p{i}",
                "1.0",
                "cp311-cp311-linux_x86_64",
                {f"j{job}p{i}/__init__.py": os.urandom(64)},
            )
        )
        for i in range(count)
    ]


def tree(repo: str, tmp_path: Path, hub: LoopHub | None) -> dict[str, bytes]:
    if hub is not None:
        return hub.files(REPO_ID)
    root = tmp_path / repo
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def indexed(files: dict[str, bytes]) -> set[str]:
    root = json.loads(files["index.json"])
    return {w["path"] for pkg in root["packages"].values() for w in json.loads(files[pkg["shard"]])["wheels"]}


@pytest.fixture(params=["local", "hub"])
def store(request: pytest.FixtureRequest) -> tuple[str, LoopHub | None]:
    if request.param == "local":
        return "wheelhouse", None
    hub: LoopHub = request.getfixturevalue("loophub")
    return HUB, hub


def test_staged_jobs_then_one_reindex(run: Run, store: tuple[str, LoopHub | None], tmp_path: Path) -> None:
    repo, hub = store
    create = ("--create",) if hub else ()
    for job in range(4):
        result = run(
            "publish", *job_wheels(tmp_path / "dist", job), *COMBO, "--repo", repo, "--stage", *create
        )
        assert result.code == 0, result.err
        assert "2 file(s) staged (awaiting 'librarian reindex')" in result.out
    files = tree(repo, tmp_path, hub)
    wheels = {p for p in files if p.endswith(".whl")}
    pending = {p for p in files if p.startswith(PENDING_DIR + "/")}
    assert len(wheels) == 8 and {parse_pending_path(p)[0] for p in pending} == wheels  # type: ignore[index]
    assert "index.json" not in files  # no job touched the index

    before = run("verify", "--repo", repo)
    assert before.code == 0, before.out
    assert before.out.count(": staged, awaiting reindex") == 8
    assert "8 staged, awaiting 'librarian reindex'" in before.out

    done = run("reindex", "--repo", repo)
    assert done.code == 0, done.out
    assert "merged 8 staged wheel(s), cleared 8 pending file(s)" in done.out
    files = tree(repo, tmp_path, hub)
    assert indexed(files) == wheels == {p for p in files if p.endswith(".whl")}
    assert not any(p.startswith(PENDING_DIR) for p in files)
    after = run("verify", "--repo", repo)
    assert after.code == 0 and "all consistent" in after.out and "staged" not in after.out
    got = run("pull", "j2p1", *PULL, "--repo", repo, "-o", "out")
    assert got.code == 0, got.err
    assert (tmp_path / "out" / "j2p1-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl").is_file()

    head = hub.head(REPO_ID) if hub else None
    again = run("reindex", "--repo", repo)
    assert again.code == 0 and "nothing to reindex" in again.out
    assert tree(repo, tmp_path, hub) == files
    if hub is not None:
        assert hub.head(REPO_ID) == head  # a no-op makes no commit
        titles = [c.title for c in HfApi(endpoint=hub.url).list_repo_commits(REPO_ID, repo_type="dataset")]
        assert sum("--stage" in t for t in titles) == 4 and sum("reindex" in t for t in titles) == 1


def test_stage_next_to_a_direct_publish_and_a_replacement(run: Run, tmp_path: Path) -> None:
    (first,) = job_wheels(tmp_path / "a", 0, 1)
    assert run("publish", first, *COMBO).code == 0
    first_sha = json.loads((tmp_path / "wheelhouse/index/j0p0.json").read_bytes())["wheels"][0]["sha256"]
    (second,) = job_wheels(tmp_path / "b", 0, 1)  # same name, other bytes
    refused = run("publish", second, *COMBO, "--stage")
    assert refused.code == 2 and "pass --replace" in refused.err
    assert run("publish", second, *COMBO, "--stage", "--replace").code == 0
    staged = run("verify")
    assert staged.code == 0, staged.out
    assert "j0p0-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl: staged, awaiting reindex" in staged.out
    assert run("reindex").code == 0
    files = tree("wheelhouse", tmp_path, None)
    (path,) = indexed(files)
    entry = json.loads(files["index/j0p0.json"])["wheels"][0]
    assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest() != first_sha
    assert run("verify").code == 0


def test_two_jobs_staging_one_path_with_other_bytes(run: Run, tmp_path: Path) -> None:
    (one,) = job_wheels(tmp_path / "a", 0, 1)
    (two,) = job_wheels(tmp_path / "b", 0, 1)
    assert run("publish", one, *COMBO, "--stage").code == 0
    assert (
        run("publish", two, *COMBO, "--stage").code == 0
    )  # lands over the first: the tree holds these bytes
    result = run("reindex")
    assert result.code == 1  # a staged wheel did not make it: a finding
    assert "superseded:" in result.out and "holds the bytes staged later" in result.out
    assert "merged 1 staged wheel(s), cleared 2 pending file(s)" in result.out
    files = tree("wheelhouse", tmp_path, None)
    (path,) = indexed(files)
    assert (
        json.loads(files["index/j0p0.json"])["wheels"][0]["sha256"] == hashlib.sha256(files[path]).hexdigest()
    )
    assert run("verify").code == 0


def test_reindex_adopts_or_reports_a_wheel_without_entry(run: Run, tmp_path: Path) -> None:
    (wheel,) = job_wheels(tmp_path / "a", 0, 1)
    assert run("publish", wheel, *COMBO).code == 0
    (other,) = job_wheels(tmp_path / "b", 1, 1)
    stray = (
        tmp_path / "wheelhouse/j1p0/sm89/torch2.8-cu128/j1p0-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl"
    )
    stray.parent.mkdir(parents=True)
    assert run("retag", other, "--cuda", "12.8", "--torch", "2.8", "-o", str(stray.parent)).code == 0
    reported = run("reindex")
    assert reported.code == 1 and "not in the index and not staged" in reported.out
    adopted = run("reindex", "--adopt")
    assert adopted.code == 0, adopted.out
    assert "adopted  j1p0/sm89" in adopted.out
    assert run("verify").code == 0


def test_reindex_restores_a_lost_metadata_file(
    run: Run, store: tuple[str, LoopHub | None], tmp_path: Path
) -> None:
    repo, hub = store
    create = ("--create",) if hub else ()
    assert run("publish", *job_wheels(tmp_path / "dist", 0), *COMBO, "--repo", repo, *create).code == 0
    files = tree(repo, tmp_path, hub)
    lost = min(p for p in files if p.endswith(".whl.metadata"))
    original = files[lost]
    if hub is not None:
        HfApi().delete_file(lost, REPO_ID, repo_type="dataset")
    else:
        (tmp_path / repo / lost).unlink()

    before = run("verify", "--repo", repo)
    assert (
        before.code == 1
        and f"{lost}: the wheel's METADATA file (PEP 658) is missing (reindex restores it)" in before.out
    )
    dry = run("reindex", "--repo", repo, "--dry-run")
    assert dry.code == 0 and f"would restore  {lost}" in dry.out
    assert lost not in tree(repo, tmp_path, hub)
    repaired = run("reindex", "--repo", repo)
    assert repaired.code == 0 and f"restored  {lost}" in repaired.out, repaired.out + repaired.err
    assert tree(repo, tmp_path, hub)[lost] == original  # the very bytes pip was promised (the index's sha256)
    assert run("verify", "--repo", repo).code == 0
    assert "nothing to reindex" in run("reindex", "--repo", repo).out


def _write(repo: str, tmp_path: Path, hub: LoopHub | None, path: str, data: bytes) -> None:
    if hub is not None:
        HfApi().upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=REPO_ID, repo_type="dataset")
    else:
        (tmp_path / repo / path).write_bytes(data)


def test_reindex_repairs_a_bad_entry_and_refresh_rewrites_every_entry(
    run: Run, store: tuple[str, LoopHub | None], tmp_path: Path
) -> None:
    repo, hub = store
    create = ("--create",) if hub else ()
    assert run("publish", *job_wheels(tmp_path / "dist", 0), *COMBO, "--repo", repo, *create).code == 0
    files = tree(repo, tmp_path, hub)
    shard_path = next(p for p in files if p.startswith("index/") and p.endswith(".json"))
    shard = json.loads(files[shard_path])
    bad = shard["wheels"][0]
    bad["size"] = "many"  # one entry fails its checks; its package's other entry stays usable
    _write(repo, tmp_path, hub, shard_path, (json.dumps(shard, indent=1, sort_keys=True) + "\n").encode())
    found = run("verify", "--repo", repo)
    assert found.code == 1 and f"{bad['path']}: index entry fails its checks" in found.out
    package = shard["package"]
    listed = run("ls", package, "--repo", repo, "--json")
    assert listed.code == 0 and "skipped an index entry" in listed.err
    repaired = run("reindex", "--repo", repo)
    assert repaired.code == 0 and f"repaired  {bad['path']}" in repaired.out, repaired.out + repaired.err
    assert run("verify", "--repo", repo, "--deep").code == 0
    refreshed = run("reindex", "--refresh", "--repo", repo)
    assert refreshed.code == 0, refreshed.out + refreshed.err
    assert run("verify", "--repo", repo, "--deep").code == 0
