"""The checked-in nvcc fixtures (``tests/data/cuda/``): what MANIFEST.json records matches the files and
today's recipe, and a rebuild (``LIBRARIAN_REBUILD_FIXTURES=1`` with nvcc on PATH) gives the same facts."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

import pytest

from librarian.wheel.binaries import inspect_binary
from tests.cuda_fixtures import (
    DATA,
    REBUILD_ENV,
    checked_in,
    commands,
    file_names,
    rebuilding,
    rebuilt,
    recorded,
    recorded_toolkit,
)


def test_manifest_records_every_file_and_todays_command() -> None:
    files = recorded()["files"]
    assert isinstance(files, dict)
    # A changed recipe without a rebuild fails here: run tests/data/cuda/rebuild.py and commit.
    assert {file: entry["command"] for file, entry in files.items()} == {
        file: shlex.join(cmd) for file, cmd in commands().items()
    }
    for file, entry in files.items():
        data = (DATA / file).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"]), file
    assert recorded_toolkit() == (13, 0)  # the CUDA line the cu130 tests label the fixtures with


def test_fixtures_stay_small() -> None:
    sizes = {file: (DATA / file).stat().st_size for file in file_names().values()}
    # sm75.so links cudart statically (the nvcc default), and stripped.so is it stripped: ~1.7 MB of the
    # ~2.1 MB. Everything else is a few KB to 40 KB.
    assert sum(sizes.values()) < 2_500_000
    assert all(size < 64_000 for file, size in sizes.items() if file not in ("sm75.so", "stripped.so"))


def _facts(path: Path) -> tuple[object, ...]:
    """What the tests rely on: archs by kind, the toolkit, and the cudart it links (not glibc: the host's)."""
    with path.open("rb") as f:
        b = inspect_binary(f, path.name)
    return (
        b.sass,
        b.ptx,
        b.relocatable_sass,
        b.relocatable_ptx,
        b.lto,
        b.toolkit,
        [lib for lib in b.needed if lib.startswith("libcudart")],
    )


def test_rebuilt_fixtures_give_the_same_facts(tmp_path_factory: pytest.TempPathFactory) -> None:
    if not rebuilding():
        pytest.skip(f"set {REBUILD_ENV}=1 (with nvcc on PATH) to rebuild the fixtures and compare")
    fresh, kept = rebuilt(tmp_path_factory), checked_in()
    assert fresh.keys() == kept.keys()
    for name in sorted(kept):
        assert _facts(fresh[name]) == _facts(kept[name]), f"{name}: rerun tests/data/cuda/rebuild.py"
