"""Against a repo whose LFS batch endpoint answers in the Xet shape ({"transfer": "xet", ...}, actions
whether or not it holds the object): every "does the Hub hold this blob?" still answers right, and what
was committed by reference is proved by paths-info after the commit. The hf_xet upload path itself is not
exercised here (the tests upload with HF_HUB_DISABLE_XET=1)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO_ID = "team/wheels"
REPO = f"hf://datasets/{REPO_ID}"
COMBO = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--repo", REPO)


@pytest.fixture
def xet(make_loophub: Callable[..., LoopHub]) -> LoopHub:
    return make_loophub(lfs_batch_transfer="xet")


def wheel(tmp_path: Path, name: str) -> Path:
    return make_wheel(
        tmp_path / name, name, "1.0", "cp311-cp311-linux_x86_64", {f"{name}/__init__.py": os.urandom(50_000)}
    )


def test_the_fan_in_path_lands_on_a_xet_backed_repo(run: Run, xet: LoopHub, tmp_path: Path) -> None:
    assert run("publish", str(wheel(tmp_path, "seed")), *COMBO, "--create").code == 0
    for job in range(2):
        staged = run(
            "publish",
            str(wheel(tmp_path, f"kern{job}")),
            *COMBO,
            "--stage",
            "--manifest",
            f"manifests/m{job}.json",
        )
        assert staged.code == 0, staged.err
    done = run("reindex", "--manifest", "manifests", "--repo", REPO)
    assert done.code == 0, done.err
    assert "merged 2 staged wheel(s)" in done.out
    assert run("verify", "--repo", REPO, "--deep").code == 0


def test_a_staged_blob_the_hub_lost_is_found_missing(run: Run, xet: LoopHub, tmp_path: Path) -> None:
    assert run("publish", str(wheel(tmp_path, "seed")), *COMBO, "--create").code == 0
    assert run("publish", str(wheel(tmp_path, "kern")), *COMBO, "--stage", "--manifest", "m.json").code == 0
    blob = json.loads((tmp_path / "m.json").read_text())["wheels"][0]["sha256"]
    xet.storage.delete_lfs(xet.storage.get("dataset", REPO_ID), [blob], rewrite_history=False)
    done = run("reindex", "--manifest", "m.json", "--repo", REPO)
    assert done.code == 1  # a finding: the entry is dropped, the rest lands
    assert "the store does not hold its bytes" in done.out + done.err
    files = xet.files(REPO_ID)
    assert not any(p.startswith("kern/") for p in files)


def test_the_proof_after_a_commit_fails_loudly() -> None:
    from types import SimpleNamespace

    from librarian.errors import StoreError
    from librarian.stores.base import Upload
    from librarian.stores.hub_lfs import LfsObjects

    reported = [SimpleNamespace(path="kern/a.whl", lfs=SimpleNamespace(sha256="b" * 64, size=10))]
    api = SimpleNamespace(get_paths_info=lambda *a, **k: reported)
    lfs = LfsObjects(api, REPO_ID, "main", REPO, lambda what, call: call(), lambda what: None)  # type: ignore[arg-type]
    with pytest.raises(
        StoreError, match=r"kern/a.whl: after commit 0123456789ab the Hub reports sha256 b+, 10 bytes"
    ):
        lfs.prove([Upload("kern/a.whl", None, "a" * 64, 10)], "0123456789ab" + "0" * 28)
    with pytest.raises(StoreError, match=r"kern/b.whl: not in commit"):
        lfs.prove([Upload("kern/b.whl", None, "a" * 64, 10)], "0123456789ab" + "0" * 28)
    reported[0] = SimpleNamespace(path="kern/a.whl", lfs=SimpleNamespace(sha256="a" * 64, size=10))
    lfs.prove([Upload("kern/a.whl", None, "a" * 64, 10)], "0" * 40)  # holds: no error
