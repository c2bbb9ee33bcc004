"""Hostile store states (README: Stores, a store that lies): lying entries, links, FIFOs, killed changes, temp files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from librarian.stores import local as local_store
from tests.conftest import Run, pull_args
from tests.hostile.helpers import (
    CELL,
    FLAGS,
    assert_one_line,
    build,
    cli,
    copy_store,
    publish_once,
    shard,
    wheel_name,
)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return publish_once(tmp_path_factory.mktemp("published"), ("tinykern", "evilpkg"))


@pytest.fixture
def store(run: Run, tmp_path: Path, published: Path) -> Path:
    """A store with tinykern 0.1.0 and evilpkg 0.1.0, both in sm89 torch 2.8 cu128 (published once per
    module, copied for each test) in ./wheelhouse; their wheels in ./dist."""
    return copy_store(published, tmp_path)


def _point_tinykern_at_evilpkg(store: Path) -> None:
    data = shard(store, "tinykern")
    evil = shard(store, "evilpkg")["wheels"][0]  # type: ignore[index]
    entry = data["wheels"][0]  # type: ignore[index]
    for key in ("path", "sha256", "size", "filename"):
        entry[key] = evil[key]
    (store / "index/tinykern.json").write_text(json.dumps(data))


def test_item1_entry_of_one_package_pointing_at_another_is_a_finding_and_pull_refuses(
    run: Run, store: Path, tmp_path: Path
) -> None:
    _point_tinykern_at_evilpkg(store)
    found = run("verify", "--deep")
    assert found.code == 1
    assert "index entry of package tinykern names a wheel of evilpkg" in found.out
    pulled = run(*pull_args("tinykern"))
    assert pulled.code == 2
    assert_one_line(pulled.err, "names a wheel of evilpkg", "refused")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_item1_entry_whose_cell_disagrees_with_its_path_is_a_finding(run: Run, store: Path) -> None:
    data = shard(store, "tinykern")
    data["wheels"][0]["cell"]["sm"] = "sm_90"  # type: ignore[index]
    (store / "index/tinykern.json").write_text(json.dumps(data))
    found = run("verify")
    assert (
        found.code == 1
        and "index entry says tinykern sm90 cu128torch2.8, its path says tinykern sm89" in found.out
    )


def test_item1_wheel_at_the_right_path_with_another_projects_metadata_is_refused_by_pull(
    run: Run, store: Path, tmp_path: Path
) -> None:
    """The bytes at tinykern's path are evilpkg's wheel renamed: the sha256 in the index matches them."""
    target = store / CELL / wheel_name()
    shutil.copyfile(store / "evilpkg/sm89/torch2.8-cu128" / wheel_name("evilpkg"), target)
    data = shard(store, "tinykern")
    evil = shard(store, "evilpkg")["wheels"][0]  # type: ignore[index]
    data["wheels"][0]["sha256"], data["wheels"][0]["size"] = evil["sha256"], evil["size"]  # type: ignore[index]
    (store / "index/tinykern.json").write_text(json.dumps(data))
    pulled = run(*pull_args("tinykern"))
    assert pulled.code == 2
    assert_one_line(pulled.err, f"{CELL}/{wheel_name()}", "does not match", "refused")
    assert run("verify").code == 1


def _link_cell_outside(store: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    shutil.move(str(store / CELL), outside)
    (store / CELL).symlink_to(outside, target_is_directory=True)
    return outside


def test_item2_gc_and_publish_never_follow_a_link_out_of_the_store(
    run: Run, store: Path, tmp_path: Path
) -> None:
    outside = _link_cell_outside(store, tmp_path)
    before = sorted(p.name for p in outside.iterdir())
    gc = run("gc", "--drop-torch", "2.8", "--yes", "--allow-empty")
    assert gc.code == 2
    assert_one_line(gc.err, "a symbolic link inside the store")
    newer = build(tmp_path / "dist2", "tinykern", "0.2.0")
    published = run("publish", str(newer), *FLAGS)
    assert published.code == 2
    assert_one_line(published.err, "a symbolic link inside the store")
    assert sorted(p.name for p in outside.iterdir()) == before
    found = run("verify")
    assert found.code == 1 and f"{CELL}: a symbolic link inside the store" in found.out


def test_item2_a_linked_index_file_is_not_read(run: Run, store: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    shutil.move(str(store / "index/tinykern.json"), secret)
    (store / "index/tinykern.json").symlink_to(secret)
    result = run("verify")
    assert result.code == 2
    assert_one_line(result.err, "index/tinykern.json")


@pytest.mark.parametrize("make", ["fifo", "dev_zero"])
@pytest.mark.parametrize("command", [("verify", "--deep"), ("reindex", "--adopt"), ("verify",)])
def test_item3_fifo_or_device_at_a_wheel_path_never_hangs(
    store: Path, tmp_path: Path, make: str, command: tuple[str, ...]
) -> None:
    target = store / CELL / wheel_name(version="0.3.0")
    if make == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    # The command needs ~1 s; the bound only turns a hang (a FIFO opened for reading) into a failure, and
    # is far above what a loaded machine stretches the run to (20 s was crossed beside a torch install).
    result = cli(*command, cwd=tmp_path, timeout=240)
    assert "Traceback" not in result.stderr
    if command[0] == "verify":
        assert result.returncode == 1
        assert "not a regular file" in result.stdout or "a symbolic link" in result.stdout
    else:
        assert result.returncode in (0, 1), result.stderr


def _kill_at(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """Simulate a SIGKILL: the store's change stops dead at the first write of ``when`` (or first delete)."""

    class Killed(BaseException):
        pass

    real_write = local_store.atomic_write
    real_delete = local_store.LocalStore._delete

    def write(
        target: Path, data: bytes | None = None, *, source: Path | None = None, mode: int = 0o644
    ) -> None:
        if target.name == when:
            raise Killed
        real_write(target, data, source=source, mode=mode)

    def delete(self: local_store.LocalStore, paths: object) -> None:
        listed = list(paths)  # type: ignore[call-overload]
        if when == "delete" and any(p.endswith(".whl") for p in listed):
            raise Killed
        real_delete(self, listed)

    monkeypatch.setattr(local_store, "atomic_write", write)
    monkeypatch.setattr(local_store.LocalStore, "_delete", delete)


def _interrupted(run: Run, when: str, *argv: str) -> None:
    with pytest.MonkeyPatch.context() as mp, pytest.raises(BaseException) as caught:
        _kill_at(mp, when)
        run(*argv)
    assert type(caught.value).__name__ == "Killed"


def test_item4_gc_writes_the_index_before_it_deletes_wheels(run: Run, store: Path) -> None:
    _interrupted(run, "delete", "gc", "--drop-torch", "2.8", "--yes", "--allow-empty")
    # Killed between the index and the deletions: the index lists nothing that is missing.
    found = run("verify")
    assert "in the index but not in the store" not in found.out
    assert json.loads((store / "index.json").read_text())["packages"] == {}
    assert ".librarian-journal.json: an interrupted change left its journal" in found.out
    assert run("reindex").code == 0
    assert run("verify").code == 0
    assert not list(store.rglob("*.whl"))


def test_item5_killed_between_shard_and_root_is_repaired_by_reindex(
    run: Run, store: Path, tmp_path: Path
) -> None:
    newer = build(tmp_path / "dist2", "tinykern", "0.2.0")
    _interrupted(run, "index.json", "publish", str(newer), *FLAGS)
    found = run("verify")
    assert found.code == 1 and "index.json: out of date with the index" in found.out
    assert run("reindex").code == 0
    assert run("verify").code == 0
    assert wheel_name(version="0.2.0") in (store / "index/tinykern.json").read_text()


def test_item5_killed_between_a_wheel_and_its_metadata_file_keeps_the_wheel(
    run: Run, store: Path, tmp_path: Path
) -> None:
    """The wheel is whole, its PEP 658 file never written: the recovery lists the wheel without promising it."""
    newer = build(tmp_path / "dist2", "tinykern", "0.2.0")
    _interrupted(run, wheel_name(version="0.2.0") + ".metadata", "publish", str(newer), *FLAGS)
    assert (store / CELL / wheel_name(version="0.2.0")).is_file()
    assert not (store / CELL / (wheel_name(version="0.2.0") + ".metadata")).exists()
    assert run("reindex").code == 0  # finishes the change the journal names
    assert run("verify").code == 0
    shard = json.loads((store / "index/tinykern.json").read_text())["wheels"]
    kept = [w for w in shard if w["path"].endswith(wheel_name(version="0.2.0"))]
    assert len(kept) == 1 and "metadata_sha256" not in kept[0]


def test_item5_stale_root_without_a_journal_is_rebuilt_by_reindex(
    run: Run, store: Path, tmp_path: Path
) -> None:
    """A store an older librarian left half-written (no journal): reindex rebuilds every generated file."""
    old_root = (store / "index.json").read_bytes()
    assert run("publish", str(build(tmp_path / "dist2", "tinykern", "0.2.0")), *FLAGS).code == 0
    (store / "index.json").write_bytes(old_root)
    (store / "pages/sm89-torch2.8-cu128.html").unlink()
    (store / "index/ghost.json").write_text("{}")
    assert run("verify").code == 1
    republished = run(
        "publish", str(tmp_path / "dist2" / "tinykern-0.2.0-cp311-cp311-linux_x86_64.whl"), *FLAGS
    )
    assert republished.code == 0
    assert (store / "index.json").read_bytes() != old_root  # publishing again repairs the root ...
    assert run("reindex").code == 0  # ... and reindex every generated file
    assert run("verify").code == 0, run("verify").out
    assert not (store / "index/ghost.json").exists()


def test_item5_temp_files_are_reported_and_swept(run: Run, store: Path) -> None:
    stale = store / CELL / ".librarian-tmp-abc123"
    stale.write_bytes(b"x" * 1000)
    found = run("verify")
    assert found.code == 1 and "a temp file left by an interrupted change" in found.out
    assert run("reindex").code == 0
    assert not stale.exists()
    assert run("verify").code == 0


def test_item5_killed_publish_is_finished_by_the_next_change(run: Run, store: Path, tmp_path: Path) -> None:
    newer = build(tmp_path / "dist2", "tinykern", "0.2.0")
    _interrupted(run, "tinykern.json", "publish", str(newer), *FLAGS)
    assert run("verify").code == 1
    other = build(tmp_path / "dist3", "evilpkg", "0.2.0")
    assert run("publish", str(other), *FLAGS).code == 0
    assert run("verify").code == 0
    assert wheel_name(version="0.2.0") in (store / "index/tinykern.json").read_text()
