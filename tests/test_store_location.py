"""Store locations are the stores' to parse (issue 56): one value reads, compares and records a ``--repo``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from librarian.stores.location import StoreLocation


def test_a_folder_is_known_by_its_path_and_a_url_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mf" / "base").mkdir(parents=True)
    here = StoreLocation.parse("mf/base")
    assert here.is_local and here.recorded() == str(tmp_path / "mf" / "base")
    assert here.same_as(StoreLocation.parse(str(tmp_path / "mf" / "base")))
    os.symlink(tmp_path / "mf", tmp_path / "link")
    assert here.same_as(StoreLocation.parse("link/base"))  # resolved
    assert StoreLocation.parse("C:\\wheels").is_local  # a Windows folder, not the scheme "c"
    hub = StoreLocation.parse("hf://datasets/team/wheels")
    assert (hub.scheme, hub.recorded()) == ("hf", "hf://datasets/team/wheels")
    assert hub.same_as(StoreLocation.parse("hf://datasets/team/wheels"))
    assert not hub.same_as(StoreLocation.parse("hf://datasets/team/other"))
    assert not hub.same_as(here) and StoreLocation.parse("HTTPS://hub.example/x").scheme == "https"
