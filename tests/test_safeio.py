"""librarian.safeio: the one temp-then-rename every writer uses, and reads that refuse what is not a file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from librarian.safeio import TMP_PREFIX, NotRegular, atomic_output, atomic_path, atomic_write, read_regular


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TMP_PREFIX))


def test_atomic_write_replaces_whole_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "index.json"
    atomic_write(target, b"old")
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _leftovers(target.parent) == []


def test_atomic_write_copies_a_source_file(tmp_path: Path) -> None:
    source = tmp_path / "src.whl"
    source.write_bytes(os.urandom(3 << 20))
    atomic_write(tmp_path / "out.whl", source=source, mode=0o600)
    assert (tmp_path / "out.whl").read_bytes() == source.read_bytes()
    assert stat.S_IMODE((tmp_path / "out.whl").stat().st_mode) == 0o600


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path: Path) -> None:
    target = tmp_path / "w.whl"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(target) as out:
        out.write(b"half of a new")
        raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_atomic_output_lets_the_umask_decide_by_default(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        with atomic_output(tmp_path / "f") as out:
            out.write(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640


def test_atomic_path_renames_what_the_caller_made_and_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "pulled.whl"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(TMP_PREFIX) and not tmp.exists()
        tmp.write_bytes(b"checked")
        assert not target.exists()  # nothing at the final name until the block ends
    assert target.read_bytes() == b"checked"
    with pytest.raises(ValueError), atomic_path(tmp_path / "refused.whl") as tmp:
        tmp.write_bytes(b"bad hash")
        raise ValueError("sha256 mismatch")
    assert not (tmp_path / "refused.whl").exists() and _leftovers(tmp_path) == []


def test_two_writers_get_distinct_temp_names(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "a") as one, atomic_path(tmp_path / "a") as two:
        assert one != two
        one.write_bytes(b"1")
        two.write_bytes(b"2")
    assert (tmp_path / "a").read_bytes() == b"1"  # the outer block ends last: last rename wins


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "index.json"
    os.mkfifo(fifo)
    with pytest.raises(NotRegular, match="FIFO"):
        read_regular(fifo, 1 << 20)
