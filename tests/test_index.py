"""The sharded index: entries to JSON and back, deterministic shards, malformed input named."""

from __future__ import annotations

import json

import pytest

from librarian.catalogue import render_catalogue, render_pages
from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label
from librarian.errors import StoreError
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.index import Index, IndexEntry
from librarian.index_files import parse_root, parse_shard, render_index


def entry(
    package: str = "flash_attn",
    sm: str = "89",
    label: str = "cu128torch2.9",
    version: str = "2.8.3",
    py: str = "cp312",
) -> IndexEntry:
    cell = Cell(package, GpuArch.parse(sm), Label.parse(label))
    filename = f"{package}-{version}+{label}-{py}-{py}-linux_x86_64.whl"
    path = load_layout().path_for(cell, filename)
    # a torch extension: bound to its torch line by a mangled c10 symbol, and to its CUDA major by libcudart
    needed = ("libc10.so", f"libcudart.so.{Label.parse(label).cuda[0]}")
    facts = WheelFacts(
        filename,
        (
            BinaryFacts(
                f"{package}/_C.so",
                BinaryFormat.ELF,
                "x86_64",
                sass=(GpuArch.parse(sm),),
                needed=needed,
                torch_symbols=("_ZN3c103fooEv",),
            ),
        ),
    )
    return IndexEntry(path, "ab" * 32, 1234, cell, "2026-11-30T00:00:00Z", facts)


def test_round_trip_through_shards() -> None:
    index = Index(load_layout()).with_entries(
        [entry(), entry(sm="90a"), entry("natten", label="cu126torch2.8")]
    )
    files = render_index(index)
    assert set(files) == {"index.json", "index/flash_attn.json", "index/natten.json"}
    root = parse_root(files["index.json"])
    assert dict(root.shards) == {"flash_attn": "index/flash_attn.json", "natten": "index/natten.json"}
    back = [e for k, p in sorted(root.shards.items()) for e in parse_shard(files[p], p, k)[0]]
    assert tuple(sorted(back, key=lambda e: e.path)) == index.entries
    assert back[0].facts == index.entries[0].facts and back[0].facts is not None
    assert back[0].facts.binaries[0].sass == (GpuArch.parse("sm_89"),)
    shard = json.loads(files["index/flash_attn.json"])
    assert shard["wheels"][0]["cell"] == {
        "package": "flash_attn",
        "sm": "sm_89",
        "torch": "2.9",
        "cuda": "12.8",
    }


def test_unchanged_package_shard_is_byte_identical() -> None:
    base = Index(load_layout()).with_entries([entry(), entry("natten", label="cu126torch2.8")])
    more = base.with_entries([entry("natten", version="0.22.0", label="cu126torch2.8")])
    a, b = render_index(base), render_index(more)
    assert a["index/flash_attn.json"] == b["index/flash_attn.json"]
    assert a["index/natten.json"] != b["index/natten.json"]
    assert a["index.json"] != b["index.json"]


def test_removal() -> None:
    e1, e2 = entry(), entry(sm="80")
    index = Index(load_layout()).with_entries([e1, e2]).with_entries(removed=[e1.path])
    assert index.entries == (e2,)
    assert "index/flash_attn.json" in render_index(index)
    assert render_index(index.with_entries(removed=[e2.path])).keys() == {"index.json"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"{", "not valid JSON"),
        (b'{"schema": 9}', "unsupported index schema 9"),
        (b"[]", "expected a JSON object"),
        (b'{"schema": 1, "layout": {"name": "x"}, "packages": {}}', "malformed root"),
    ],
)
def test_bad_root(text: bytes, problem: str) -> None:
    with pytest.raises(StoreError, match=problem):
        parse_root(text, "store/index.json")


def test_bad_shard_entry_named() -> None:
    text = json.dumps(
        {"schema": 1, "wheels": [{"path": "../evil.whl", "sha256": "x", "size": 1, "cell": {}}]}
    ).encode()
    entries, bad = parse_shard(text, "index/x.json", "x")
    assert entries == () and len(bad) == 1
    assert (
        bad[0].problem.startswith("malformed index entry '../evil.whl'") and bad[0].path is None
    )  # unsafe: not kept
    assert bad[0].where == "index/x.json"


def test_a_bad_entry_poisons_only_itself_and_survives_writes_until_settled() -> None:
    good, other = entry(), entry(sm="80")
    data = json.loads(render_index(Index(load_layout()).with_entries([good, other]))["index/flash_attn.json"])
    assert data["wheels"][0]["path"] == other.path  # shards sort by path: sm80 first
    data["wheels"][0]["facts"]["binaries"][0]["sass"] = ["sm_2197815386"]  # a corrupt arch field
    entries, bad = parse_shard(json.dumps(data).encode(), "index/flash_attn.json", "flash_attn")
    assert [e.path for e in entries] == [good.path]
    assert [b.path for b in bad] == [other.path] and "sm_2197815386: not a GPU arch" in bad[0].problem
    index = Index(load_layout(), entries, bad)
    # another wheel published meanwhile: the bad entry is written back as it was read, never dropped quietly
    more = index.with_entries([entry(version="2.9.0")])
    shard = json.loads(render_index(more)["index/flash_attn.json"])
    assert data["wheels"][0] in shard["wheels"] and len(shard["wheels"]) == 3
    # written anew (reindex re-read its bytes), it is settled
    assert index.with_entries([other]).bad == () and index.with_entries(removed=[other.path]).bad == ()


def test_an_entry_of_another_package_is_bad_in_this_shard() -> None:
    text = render_index(Index(load_layout()).with_entries([entry("natten")]))["index/natten.json"]
    entries, bad = parse_shard(text, "index/flash_attn.json", "flash_attn")
    assert entries == () and "index entry of package natten in the shard of flash_attn" in bad[0].problem


def test_pip_pages_never_mix_combos() -> None:
    index = Index(load_layout()).with_entries([entry(), entry(label="cu130torch2.9"), entry(version="2.8.2")])
    pages = render_pages(index)
    assert {p for p in pages if "/simple/" not in p} == {
        "pages/sm89-torch2.9-cu128.html",
        "pages/sm89-torch2.9-cu130.html",
    }
    page = pages["pages/sm89-torch2.9-cu128.html"].decode()
    assert page.count("<a href=") == 2 and "cu130" not in page
    # PEP 503 beside each page: the same wheels, linked from the project's folder
    project = pages["pages/sm89-torch2.9-cu128/simple/flash-attn/index.html"].decode()
    assert (
        project.count("<a href=") == 2
        and "cu130" not in project
        and 'href="../../../../flash_attn/' in project
    )
    assert 'href="flash-attn/"' in pages["pages/sm89-torch2.9-cu128/simple/index.html"].decode()
    assert (
        'href="../flash_attn/sm89/torch2.9-cu128/flash_attn-2.8.3+cu128torch2.9-cp312-cp312-linux_x86_64.whl#sha256='
        in page
    )
    assert set(render_catalogue(index)) >= set(pages) | {"index.json"}


def test_an_index_from_before_one_cpu_vocabulary_reads_in_it() -> None:
    """Facts written when the PE and Mach-O readers said ``arm64`` read as ``aarch64``, as the bytes now do."""
    from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts, facts_to_json
    from librarian.index import IndexEntry

    name = "k-1.0+cu128torch2.9-cp312-cp312-win_arm64.whl"
    old = WheelFacts(name, (BinaryFacts("k/_C.pyd", BinaryFormat.PE, "arm64"),))
    data = {
        "path": f"k/sm89/torch2.9-cu128/{name}",
        "sha256": "0" * 64,
        "size": 1,
        "cell": {"package": "k", "sm": "89", "torch": "2.9", "cuda": "12.8"},
        "facts": facts_to_json(old),
    }
    entry = IndexEntry.from_json(data, "index/k.json")
    assert entry.facts is not None and [b.cpu for b in entry.facts.binaries] == ["aarch64"]
