"""The fan-in checks what it merges (issue 46 item 1): ``reindex --manifest`` merged an entry whose cell
contradicts its path (a cell of package ``victim``, or sm90, under ``tinykern/sm89/...``), exit 0, and
``pull --sm 90`` then served the sm89 folder's wheel. Each staged entry is held to verify's own checks of an
entry against its path; a manifest staged with ``--repo base`` merges into the same folder given by its
absolute path; a FIFO given as a manifest is refused by what it is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Run

SAMPLE = next((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*cp311*.whl"))


def staged(run: Run, tmp_path: Path) -> Path:
    done = run("publish", str(SAMPLE), "--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--stage", "--manifest",
               "m.json", "--repo", "base")  # fmt: skip
    assert done.code == 0, done.err
    return tmp_path / "m.json"


@pytest.mark.parametrize(
    ("cell", "says"),
    [
        ({"package": "victim"}, "records cell victim sm89 cu130torch2.9, but its path is tinykern sm89"),
        ({"sm": "sm_90"}, "records cell tinykern sm90 cu130torch2.9, but its path is tinykern sm89"),
    ],
)
def test_an_entry_whose_cell_contradicts_its_path_is_refused_and_nothing_merged(
    run: Run, tmp_path: Path, cell: dict[str, str], says: str
) -> None:
    manifest = staged(run, tmp_path)
    doc = json.loads(manifest.read_text())
    doc["wheels"][0]["cell"].update(cell)
    manifest.write_text(json.dumps(doc))
    merged = run("reindex", "--manifest", str(manifest), "--repo", "base")
    assert merged.code == 2 and merged.err.count("\n") == 1, merged.err
    assert says in merged.err and "nothing merged" in merged.err
    assert not (tmp_path / "base" / "index.json").exists()
    assert run("pull", "tinykern", "--sm", "90", "--torch", "2.9", "--python", "3.11", "--platform",
               "linux_x86_64", "--repo", "base", "-o", "out").code != 0  # fmt: skip


def test_a_manifest_staged_with_a_relative_path_merges_into_the_same_folder_by_absolute_path(
    run: Run, tmp_path: Path
) -> None:
    manifest = staged(run, tmp_path)
    merged = run("reindex", "--manifest", str(manifest), "--repo", str((tmp_path / "base").resolve()))
    assert merged.code == 0, merged.err
    other = run("reindex", "--manifest", str(manifest), "--repo", str(tmp_path / "elsewhere"))
    assert other.code == 2 and f"staged for {(tmp_path / 'base').resolve()}, not" in other.err


def test_a_manifest_staged_with_a_relative_repo_merges_from_another_folder(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 54, item 7: the manifest records the folder it staged into, not the words that named it."""
    manifest = staged(run, tmp_path)  # --repo base, from tmp_path
    (tmp_path / "ci").mkdir()
    monkeypatch.chdir(tmp_path / "ci")
    merged = run("reindex", "--manifest", str(manifest), "--repo", "../base")
    assert merged.code == 0, merged.err
    assert json.loads((tmp_path / "base" / "index" / "tinykern.json").read_text())["wheels"]


def test_a_fifo_given_as_a_manifest_is_refused_not_waited_on(run: Run, tmp_path: Path) -> None:
    staged(run, tmp_path)  # the store exists: the FIFO is what is refused
    fifo = tmp_path / "m.fifo"
    os.mkfifo(fifo)
    result = run("reindex", "--manifest", str(fifo), "--repo", "base")
    assert result.code == 2 and result.err.count("\n") == 1 and str(fifo) in result.err, result.err
    assert "not a regular file" in result.err or "FIFO" in result.err or "fifo" in result.err
