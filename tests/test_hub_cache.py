"""The Hub store's read cache on this machine (librarian/stores/hub_cache.py): commits kept, wheels kept by
sha256, and nothing a killed write left behind carried into a later commit."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from huggingface_hub import constants

from librarian.safeio import TMP_PREFIX
from librarian.stores.hub_cache import KEEP_COMMITS, KEEP_WHEELS, ReadCache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReadCache:
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    return ReadCache("team/wheels")


def test_a_killed_writes_temp_file_is_never_carried_into_the_next_commit(cache: ReadCache) -> None:
    cache.put("parent", "index.json", b"{}")
    leftover = cache.root / "files" / "parent" / "index" / f"{TMP_PREFIX}123-abcd-tinykern.json"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_bytes(b"half")
    cache.derive("parent", "child", {"index/tinykern.json": b"[]"}, ())
    kept = sorted(p.relative_to(cache.root / "files" / "child").as_posix()
                  for p in (cache.root / "files" / "child").rglob("*") if p.is_file())  # fmt: skip
    assert kept == ["index.json", "index/tinykern.json"]


def test_the_newest_commits_are_kept(cache: ReadCache) -> None:
    for n in range(KEEP_COMMITS + 3):
        cache.put(f"c{n:02}", "index.json", b"{}")
        os.utime(cache.root / "files" / f"c{n:02}", (n, n))
    cache.put("newest", "index.json", b"{}")
    kept = sorted(d.name for d in (cache.root / "files").iterdir())
    assert len(kept) == KEEP_COMMITS and "newest" in kept and "c00" not in kept


def test_a_wheel_is_kept_by_its_sha256_and_checked_when_served(cache: ReadCache, tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"wheel bytes")
    digest = hashlib.sha256(b"wheel bytes").hexdigest()
    assert cache.wheel(digest) is None
    cache.keep_wheel(digest, wheel)
    found = cache.wheel(digest)
    assert found is not None and found.read_bytes() == b"wheel bytes"
    if os.stat(found).st_nlink > 1:  # a hard link, not a second copy, where the file system allows
        assert os.path.samefile(found, wheel)
    found.unlink()
    found.write_bytes(b"other bytes")  # a cached file that no longer holds its bytes is not served
    assert cache.wheel(digest) is None
    assert cache.wheel("../" + digest[3:]) is None  # a name that is no sha256 never reaches the disk


def test_a_wheel_in_huggingface_hubs_own_cache_is_found(cache: ReadCache, tmp_path: Path) -> None:
    digest = hashlib.sha256(b"downloaded by hf").hexdigest()
    blob = tmp_path / "hf-hub" / "datasets--team--wheels" / "blobs" / digest
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"downloaded by hf")
    assert cache.wheel(digest) == blob


def test_only_the_most_recently_used_wheels_are_kept(cache: ReadCache, tmp_path: Path) -> None:
    digests = []
    for n in range(KEEP_WHEELS + 2):
        data = f"wheel {n}".encode()
        digests.append(hashlib.sha256(data).hexdigest())
        (tmp_path / f"{n}.whl").write_bytes(data)
        cache.keep_wheel(digests[-1], tmp_path / f"{n}.whl")
        os.utime(cache.root / "blobs" / digests[-1], (n, n))
    blobs = {f.name for f in (cache.root / "blobs").iterdir()}
    assert blobs == set(digests[2:])  # the two least recently used went
