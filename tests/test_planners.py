"""The pure planners, called with hand-built indexes, wheels and machines: no CLI, no store, no files
(but for the one METADATA file publish uploads beside a wheel).

publish (``plan_publish``, ``gpu_cells``), pull (``judge_candidate``, ``best_compatible``, ``resolve``,
``render_requirements``), gc (``plan_gc``, ``freed_bytes``, ``freed_files``, ``emptied_packages``), reindex
(``plan_reindex``, ``entries_from_tree``) and ``reindex --manifest`` (``plan_manifests``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label, WheelName
from librarian.demands import GpuMatch, Wheel
from librarian.errors import BadInput, Refused
from librarian.facts import WheelFacts
from librarian.index import Index, IndexEntry, metadata_path
from librarian.ops.machine.installer import render_requirements
from librarian.ops.resolve import Wants, best_compatible, judge_candidate, resolve
from librarian.ops.store.gc import emptied_packages, freed_bytes, freed_files, plan_gc
from librarian.ops.store.gc_policy import GcPolicy
from librarian.ops.store.prepare import PreparedWheel, PublishOptions
from librarian.ops.store.publish import plan_publish
from librarian.ops.store.publish_checks import gpu_cells
from librarian.ops.store.reindex import plan_reindex
from librarian.ops.store.staged import ManifestOptions, plan_manifests
from librarian.ops.store.tree import entries_from_tree
from librarian.pending import pending_path
from librarian.stores.base import StoredFile, Upload
from tests.demand_builders import machine, so, wheel

LAYOUT = load_layout()
NOW = "2026-11-30T00:00:00Z"
CLOCK = datetime(2026, 11, 30, tzinfo=timezone.utc)
X86 = "linux_x86_64"


def sha(n: int) -> str:
    return f"{n:02x}" * 32  # distinct from the first characters on (pending paths hold 16)


def facts(filename: str, sass: str = "", ptx: str = "") -> WheelFacts:
    """A torch extension's facts: its SASS/PTX, and a mangled c10 symbol that binds it to its torch line."""
    return wheel(
        so(sass=sass, ptx=ptx, needed=("libc10.so",), torch_symbols=("_ZN3c103fooEv",)), name=filename
    )


def entry(
    package: str = "kern",
    version: str = "1.0",
    sm: str = "89",
    label: str = "cu128torch2.8",
    py: str = "cp312",
    *,
    sass: str | None = None,
    ptx: str = "",
    digest: int = 1,
    size: int = 100,
    added: str = NOW,
    requires_python: str | None = None,
    platform: str = X86,
) -> IndexEntry:
    """A stored wheel in cell (package, sm, label); its SASS is ``sm_<sm>`` unless ``sass`` says otherwise."""
    cell = Cell(package, GpuArch.parse(sm), Label.parse(label))
    filename = f"{package}-{version}+{label}-{py}-{py}-{platform}.whl"
    code = f"sm_{sm}" if sass is None else sass
    return IndexEntry(
        LAYOUT.path_for(cell, filename),
        sha(digest),
        size,
        cell,
        added,
        facts(filename, code, ptx),
        requires_python,
    )


def index(*entries: IndexEntry) -> Index:
    return Index(LAYOUT).with_entries(entries)


def wants(
    sm: str = "89", torch: str = "2.8", cuda: str | None = "12.8", python: str = "3.12", driver: str = "12.8"
) -> Wants:
    return Wants.of(machine(sm=sm, torch=torch, cuda=cuda, python=python, driver=driver))


# ---- publish ---------------------------------------------------------------------------------------


def prepared(
    filename: str = "kern-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl",
    sms: str = "89",
    digest: int = 1,
    metadata: Path | None = None,
) -> PreparedWheel:
    source = Path("/dist") / filename
    return PreparedWheel(
        source,
        source,
        WheelName.parse(filename),
        sha(digest),
        100,
        tuple(GpuArch.parse(s) for s in sms.split()),
        facts(filename, "sm_89"),
        ">=3.10",
        metadata,
        sha(99) if metadata else "",
    )


def test_publish_files_a_wheel_in_each_of_its_cells() -> None:
    w = prepared(sms="86 89")
    plan = plan_publish(index(), [w], PublishOptions(now=NOW))
    paths = [f.path for f in plan.filings]
    assert paths == [f"kern/sm86/torch2.8-cu128/{w.name}", f"kern/sm89/torch2.8-cu128/{w.name}"]
    assert [f.action for f in plan.filings] == ["add", "add"]
    assert plan.changes.uploads == tuple(Upload(p, w.staged, w.sha256, 100) for p in paths)
    assert plan.changes.deletes == () and plan.changes.message == "librarian publish: 2 wheels (kern)"
    stored = plan.changes.index.by_path()
    assert [(stored[p].cell.sm.sm, stored[p].added, stored[p].requires_python) for p in paths] == [
        ("86", NOW, ">=3.10"),
        ("89", NOW, ">=3.10"),
    ]


def test_publish_skips_the_same_bytes_at_the_same_path() -> None:
    w = prepared()
    first = plan_publish(index(), [w], PublishOptions(now=NOW))
    again = plan_publish(first.changes.index, [w], PublishOptions(now="2027-01-01T00:00:00Z"))
    assert [f.action for f in again.filings] == ["skip"] and again.added == ()
    assert again.changes.empty and again.changes.index == first.changes.index  # the old `added` stays
    assert again.changes.message == "librarian publish: 0 wheels ()"


def test_publish_refuses_an_occupied_path_unless_replace() -> None:
    stored = plan_publish(index(), [prepared(digest=1)], PublishOptions(now=NOW)).changes.index
    other = prepared(digest=2)
    with pytest.raises(
        Refused, match=r"already stored with other bytes \(sha256 010101010101…\); pass --replace"
    ):
        plan_publish(stored, [other], PublishOptions(now=NOW))
    plan = plan_publish(stored, [other], PublishOptions(replace=True, now=NOW))
    assert [f.action for f in plan.filings] == ["replace"]
    (kept,) = plan.changes.index.entries
    assert kept.sha256 == sha(2)


def test_publish_refuses_two_wheels_with_one_path_and_other_bytes() -> None:
    a, b = prepared(digest=1), prepared(digest=2)
    with pytest.raises(BadInput, match="same path as /dist/kern-1.0"):
        plan_publish(index(), [a, b], PublishOptions(now=NOW))
    same = plan_publish(index(), [a, a], PublishOptions(now=NOW))  # the same bytes twice: filed once
    assert len(same.changes.index.entries) == 1


def test_publish_uploads_the_metadata_beside_the_wheel(tmp_path: Path) -> None:
    meta = tmp_path / "w.metadata"
    meta.write_bytes(b"Metadata-Version: 2.1\nName: kern\nVersion: 1.0\n")
    plan = plan_publish(index(), [prepared(metadata=meta)], PublishOptions(now=NOW))
    wheel_up, meta_up = plan.changes.uploads
    assert meta_up == Upload(metadata_path(wheel_up.path), meta, sha(99), meta.stat().st_size)
    (e,) = plan.changes.index.entries
    assert e.metadata_sha256 == sha(99) and e.metadata_path == meta_up.path


def _cells(sass: str, platform: str = X86, label: str = "cu128torch2.8", cpu: str = "x86_64") -> list[str]:
    filename = f"kern-1.0+{label}-cp312-cp312-{platform}.whl"
    f = wheel(so(sass=sass, cpu=cpu), name=filename)
    return [f"sm{a.sm}" for a in gpu_cells(Wheel(WheelName.parse(filename), f), (), False, filename)[0]]


@pytest.mark.parametrize(
    ("sass", "cells"),
    [
        ("sm_80", ["sm80", "sm86", "sm89"]),  # same major, minor at least 0 (sm87 is Jetson: aarch64 only)
        ("sm_86", ["sm86", "sm89"]),
        ("sm_90a", ["sm90"]),  # arch-specific: that GPU alone
        ("sm_100f", ["sm100", "sm103", "sm107"]),  # family: same major, minor at least 0
        ("sm_120", ["sm120"]),  # sm121 (DGX Spark) is aarch64 only
        ("sm_80 sm_86 sm_90", ["sm80", "sm86", "sm89", "sm90"]),
    ],
)  # fmt: skip
def test_cells_by_nvidia_rules(sass: str, cells: list[str]) -> None:
    assert _cells(sass) == cells


def test_cells_count_only_gpus_beside_the_wheels_cpu() -> None:
    assert _cells("sm_86", platform="linux_aarch64", cpu="aarch64") == ["sm86", "sm87", "sm89"]


def test_cells_ptx_alone_files_nothing_and_sm_is_checked() -> None:
    filename = "kern-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl"
    name = WheelName.parse(filename)
    ptx_only = Wheel(name, wheel(so(ptx="compute_80"), name=filename))
    with pytest.raises(BadInput, match="PTX alone files no cell: pass --sm"):
        gpu_cells(ptx_only, (), False, filename)
    with pytest.raises(BadInput, match="no GPU code found in its binaries; pass --sm"):
        gpu_cells(Wheel(name), (), False, filename)
    ampere = Wheel(name, wheel(so(sass="sm_80"), name=filename))
    asked = (GpuArch.parse("89"), GpuArch.parse("86"), GpuArch.parse("89"))
    assert [a.sm for a in gpu_cells(ampere, asked, False, filename)[0]] == ["86", "89"]  # sorted, once
    with pytest.raises(Refused, match=r"have no code for sm75 \(they have sm_80\); pass --trust-sm"):
        gpu_cells(ampere, (GpuArch.parse("75"),), False, filename)
    assert gpu_cells(ampere, (GpuArch.parse("75"),), True, filename) == ((GpuArch.parse("75"),), True)
    # PTX that a GPU only JIT-compiles files no cell either, unless --trust-sm says so (and is recorded)
    with pytest.raises(
        Refused, match=r"run on sm89 only by JIT-compiling PTX \(they have compute_80\); pass --trust-sm"
    ):
        gpu_cells(ptx_only, (GpuArch.parse("89"),), False, filename)
    assert gpu_cells(ptx_only, (GpuArch.parse("89"),), True, filename)[1] is True


# ---- pull ------------------------------------------------------------------------------------------


def test_resolve_picks_the_newest_fitting_version() -> None:
    entries = [entry(version=v, digest=i) for i, v in enumerate(("1.0", "1.10", "1.9"))]
    r = resolve(entries, "kern", wants())
    assert r.pick is not None and r.pick.name.version.public == "1.10" and r.near == () and r.note == ""


def test_resolve_names_every_miss_nearest_first() -> None:
    entries = [entry(label="cu128torch2.9"), entry(sm="90", digest=2), entry(py="cp311", digest=3)]
    r = resolve(entries, "kern", wants())
    assert r.pick is None and r.hint == ""
    said = {str(c.entry.cell.sm) + c.entry.name.python_tag: c.differences for c in r.near}
    assert said == {
        "sm_89cp312": ("another torch line: 2.9, not 2.8",),
        "sm_90cp312": ("its code does not run on sm_89: kern/_C.so has no code for sm_89",),
        "sm_89cp311": ("another Python: cp311, this interpreter is cp312",),
    }
    assert resolve([], "kern", wants()).near == ()  # not in the store at all


def test_resolve_skips_a_version_whose_requires_python_excludes_this_one() -> None:
    old, new = entry(version="1.0"), entry(version="2.0", digest=2, requires_python=">=3.13")
    r = resolve([old, new], "kern", wants())
    assert r.pick == old
    candidate = judge_candidate(new, wants())
    assert not candidate.exact and candidate.blockers == ("Requires-Python >=3.13 excludes Python 3.12",)


def test_resolve_takes_the_newest_cuda_line_when_torch_does_not_say() -> None:
    entries = [entry(label="cu126torch2.8"), entry(label="cu128torch2.8", digest=2)]
    r = resolve(entries, "kern", wants(cuda=None))
    assert r.pick == entries[1]
    assert r.note == "kern: several CUDA lines fit (cu126, cu128); took cu128 (pass --cuda to choose)"


def test_judge_candidate_exact_and_compatible() -> None:
    exact = judge_candidate(entry(), wants())
    assert exact.exact and exact.compatible and exact.fit is GpuMatch.EXACT
    # filed (by hand) only under sm86: its SASS runs natively on sm89, so the judgement takes it exactly
    ampere = judge_candidate(entry(sm="86"), wants())
    assert ampere.exact and ampere.fit is GpuMatch.SASS and ampere.misses == () and ampere.blockers == ()
    hopper = judge_candidate(entry(sm="90"), wants())  # sm_90 SASS never runs on sm89
    assert not hopper.compatible and hopper.fit is None
    ptx = judge_candidate(
        entry(sm="80", sass="", ptx="compute_80"), wants()
    )  # JIT only: compatible, not exact
    assert ptx.misses == ("runs on sm_89 only by JIT-compiling its compute_80 PTX",) and ptx.compatible
    older_minor = judge_candidate(entry(label="cu126torch2.8"), wants())  # 12.6 runs under 12.8: served
    assert older_minor.exact and older_minor.other_cuda and older_minor.other_line
    assert older_minor.why_this_line() == "older CUDA minor: runs by minor-version compatibility"


def test_best_compatible_prefers_sass_then_the_same_cuda_line_then_newest_then_nearest() -> None:
    w = wants()
    ptx = entry(sm="80", sass="", ptx="compute_80", version="9.0", digest=1)
    sass80 = entry(sm="80", version="1.0", digest=2)
    sass86 = entry(sm="86", version="1.0", digest=3)
    newer80 = entry(sm="80", version="1.1", digest=4)
    other_line = entry(sm="86", version="5.0", label="cu126torch2.8", digest=5)
    judged = [judge_candidate(e, w) for e in (ptx, sass80, sass86, other_line)]
    assert judged[0].fit is GpuMatch.PTX
    best = best_compatible(judged, w)
    assert best is not None and best.entry == sass86  # SASS over PTX, cu128 over cu126, sm86 nearer than sm80
    best = best_compatible([*judged, judge_candidate(newer80, w)], w)
    assert best is not None and best.entry == newer80  # a newer version before a nearer arch
    best = best_compatible([judged[0], judged[3]], w)
    assert best is not None and best.entry == other_line  # SASS of an older CUDA minor over PTX
    assert best_compatible([judge_candidate(entry(sm="90"), w)], w) is None


def test_resolve_hints_at_compatible_and_takes_it_when_asked() -> None:
    ptx = entry(sm="80", sass="", ptx="compute_80")
    missed = resolve([ptx], "kern", wants())
    assert missed.pick is None
    how = "compute_80 PTX (JIT-compiled at first use)"
    assert missed.hint == f"kern: {ptx.filename} (sm80) runs here by {how}; pass --compatible to take it"
    took = resolve([ptx], "kern", wants(), compatible=True)
    assert took.pick == ptx
    assert (
        took.note == f"kern: no exact match; took {ptx.filename} (filed under sm80), which runs here by {how}"
    )


def test_resolve_takes_a_wheel_filed_under_fewer_gpus_than_it_runs_on_and_says_where() -> None:
    ampere = entry(sm="86")
    took = resolve([ampere], "kern", wants())
    assert took.pick == ampere
    assert (
        took.note == f"kern: took {ampere.filename}, filed under sm86; it runs here by compatible sm_86 SASS"
    )
    same_bytes = [ampere, entry(sm="89", sass="sm_86")]  # the same wheel filed in both cells
    assert resolve(same_bytes, "kern", wants()).pick == same_bytes[1]  # the copy filed for this very GPU


def test_render_requirements_pins_each_wheel_by_hash() -> None:
    a, b = entry(), entry(package="other_kern", digest=2)
    text = render_requirements([(a, "file:///w/a.whl"), (b, "https://hub/resolve/abc/b.whl")])
    assert text.splitlines() == [
        "# written by librarian pull: install with  pip install --force-reinstall --no-deps -r THIS_FILE",
        f"kern @ file:///w/a.whl --hash=sha256:{sha(1)}",
        f"other_kern @ https://hub/resolve/abc/b.whl --hash=sha256:{sha(2)}",
    ]


# ---- gc --------------------------------------------------------------------------------------------


def _removed(idx: Index, **policy: object) -> dict[str, str]:
    return {r.entry.path: r.reason for r in plan_gc(idx, GcPolicy(now=CLOCK, **policy))}  # type: ignore[arg-type]


def test_gc_keep_torch_and_drop_torch() -> None:
    e = [entry(label=f"cu128torch{t}", digest=i) for i, t in enumerate(("2.7", "2.8", "2.9"))]
    assert _removed(index(*e), keep_torch=2) == {e[0].path: "torch 2.7 is not among the newest 2 (2.9, 2.8)"}
    assert _removed(index(*e), drop_torch=((2, 8),)) == {e[1].path: "torch 2.8 dropped (--drop-torch)"}
    both = _removed(index(*e), keep_torch=2, drop_torch=((2, 7), (2, 9)))
    assert both == {
        e[0].path: "torch 2.7 is not among the newest 2 (2.9, 2.8)",  # the first reason is kept
        e[2].path: "torch 2.9 dropped (--drop-torch)",
    }
    assert _removed(index(*e)) == {}  # no rule: nothing goes


def test_gc_keep_versions_counts_per_cell_python_and_platform() -> None:
    old, new = entry(version="1.0"), entry(version="1.1", digest=2)
    other_cuda = entry(version="0.9", label="cu126torch2.8", digest=3)  # another cell: its own count
    arm = entry(version="0.9", platform="linux_aarch64", digest=4)
    removed = _removed(index(old, new, other_cuda, arm), keep_versions=1)
    assert removed == {
        old.path: "superseded: keeping the newest 1 version(s) of this cell (1.1+cu128torch2.8)"
    }


def test_gc_older_than_never_takes_the_last_wheel_of_a_kept_line() -> None:
    old = entry(version="1.0", added="2026-01-01T00:00:00Z")
    older = entry(version="0.9", added="2025-01-01T00:00:00Z", digest=2)
    assert _removed(index(old, older), older_than_days=30) == {
        older.path: "published 2025-01-01T00:00:00Z, older than 30 days"
    }
    assert (
        _removed(index(old), older_than_days=30, keep_versions=0) == {}
    )  # every rule says go: the last stays
    # a line gc drops may lose every wheel
    assert set(_removed(index(old, older), older_than_days=30, drop_torch=((2, 8),))) == {
        old.path,
        older.path,
    }
    undated = entry(version="0.1", added="", digest=3)  # no date: never "older than"
    assert undated.path not in _removed(index(old, undated), older_than_days=1)


def test_gc_sizes_count_each_blob_once_and_name_emptied_packages() -> None:
    a = entry(sm="86", digest=1, size=10)
    a_too = entry(sm="89", digest=1, size=10)  # the same bytes in a second cell
    b = entry(package="solo", digest=2, size=7)
    idx = index(a, a_too, b)
    removals = plan_gc(idx, GcPolicy(drop_torch=((2, 8),), now=CLOCK))
    assert freed_bytes(idx, removals) == 17 and emptied_packages(idx, removals) == ("kern", "solo")
    only_one = [r for r in removals if r.entry == a]
    assert freed_bytes(idx, only_one) == 0  # a_too still holds the blob
    assert emptied_packages(idx, only_one) == ()
    # each wheel, plus the pages and shards left empty (kern's sm86 page and its PEP 503 tree go; its shard stays)
    assert freed_files(idx, only_one) == 4


# ---- reindex (pending files) -----------------------------------------------------------------------


def _tree(*entries: IndexEntry, sha256: bool = True) -> list[StoredFile]:
    return [StoredFile(e.path, e.size, e.sha256 if sha256 else None) for e in entries]


def test_reindex_merges_what_landed_and_clears_every_pending_file() -> None:
    landed = entry(digest=1)
    lost = entry(sm="86", digest=2)
    pending = {pending_path(landed): landed, pending_path(lost): lost}
    changes, report = plan_reindex(index(), _tree(landed), pending)
    assert report.merged == (landed,) and report.cleared == 2
    assert [(p.path, p.problem) for p in report.dropped] == [
        (pending_path(lost), "its wheel is not in the store")
    ]
    assert changes.index.entries == (landed,) and changes.deletes == tuple(sorted(pending))
    assert changes.uploads == () and changes.rebuild


def test_reindex_settles_racing_stages_of_one_path_by_the_bytes_there() -> None:
    first = entry(digest=1, added="2026-11-01T00:00:00Z")
    second = entry(digest=2, added="2026-11-02T00:00:00Z")
    pending = {pending_path(first): first, pending_path(second): second}
    _, report = plan_reindex(index(), _tree(first), pending)
    assert report.merged == (first,)  # the file holds the first job's bytes, though the second staged later
    assert [p.problem for p in report.dropped] == [f"superseded: {first.path} holds the bytes staged later"]
    intruder = entry(digest=3)
    _, report = plan_reindex(index(), _tree(intruder), {pending_path(first): first})
    assert report.merged == () and [p.problem for p in report.dropped] == [
        "the stored file is not the wheel staged (another job filed other bytes there)"
    ]


def test_reindex_matches_by_size_where_the_listing_has_no_hash() -> None:
    staged = entry(size=123)
    _, report = plan_reindex(index(), _tree(staged, sha256=False), {pending_path(staged): staged})
    assert report.merged == (staged,)


def test_reindex_leaves_an_indexed_wheel_and_clears_its_pending_file() -> None:
    e = entry()
    changes, report = plan_reindex(index(e), _tree(e), {pending_path(e): e})
    assert report.merged == () and report.cleared == 1 and changes.index == index(e)


def test_reindex_adopts_or_reports_wheels_the_index_lacks() -> None:
    known, stray = entry(), entry(sm="86", digest=2)
    files = [*_tree(known, stray), StoredFile("index.json", 10), StoredFile("kern/sm86/README.txt", 3)]
    _, report = plan_reindex(index(known), files, {})
    assert [(p.path, p.problem) for p in report.unindexed] == [
        (stray.path, "not in the index and not staged ('reindex --adopt' reads it and takes it in)")
    ]
    adopt = entries_from_tree(LAYOUT, files, lambda f: "unused")
    assert [e.path for e in adopt] == [known.path, stray.path]  # facts unknown, from the path alone
    changes, report = plan_reindex(index(known), files, {}, adopt)
    assert report.adopted == (adopt[1],) and report.unindexed == ()
    assert changes.index.by_path()[stray.path].sha256 == stray.sha256


def test_entries_from_tree_skips_misfiled_and_unasked_wheels() -> None:
    e = entry()
    other_gpu = StoredFile(e.path.replace("sm89", "sm90"), 5, sha(7))  # a filename names no GPU: adopted
    foreign = StoredFile(e.path.replace("/kern-", "/evil-"), 5, sha(8))  # evil's wheel under kern
    relabelled = StoredFile(e.path.replace("torch2.8-cu128", "torch2.9-cu128"), 5, sha(9))  # label vs folder
    other = entry(package="other_kern", digest=9)
    hashed: list[str] = []

    def sha_of(f: StoredFile) -> str:
        hashed.append(f.path)
        return sha(1)

    files = [StoredFile(e.path, e.size, None), other_gpu, foreign, relabelled, *_tree(other)]
    found = entries_from_tree(LAYOUT, files, sha_of, {"kern"})
    assert [(x.path, x.sha256, x.facts) for x in found] == [
        (e.path, sha(1), None),
        (other_gpu.path, sha(7), None),
    ]
    assert hashed == [e.path]  # only where the listing had no hash


# ---- reindex --manifest ------------------------------------------------------------------------------


def test_manifest_plan_skips_same_bytes_refuses_other_bytes_and_replaces_when_asked(tmp_path: Path) -> None:
    held = entry(digest=1)
    same, other, new = entry(digest=1), entry(digest=2), entry(sm="86", digest=3)
    changes, merged = plan_manifests(index(held), [same, new], ManifestOptions())
    assert merged == [new] and changes.uploads == (Upload(new.path, None, new.sha256, new.size),)
    assert changes.message == "librarian reindex --manifest: 1 staged wheel(s) (kern)"
    with pytest.raises(Refused, match="already stored with other bytes .*; pass --replace"):
        plan_manifests(index(held), [other], ManifestOptions())
    changes, merged = plan_manifests(index(held), [other], ManifestOptions(replace=True))
    assert merged == [other] and changes.index.entries == (other,)


def test_manifest_plan_commits_metadata_it_has_and_forgets_what_it_lacks(tmp_path: Path) -> None:
    meta = tmp_path / "m.metadata"
    meta.write_bytes(b"Metadata-Version: 2.1\n")
    with_meta = replace(entry(digest=1), metadata_sha256=sha(50))
    lacking = replace(entry(sm="86", digest=2), metadata_sha256=sha(51))
    changes, merged = plan_manifests(index(), [with_meta, lacking], ManifestOptions(), {sha(50): meta})
    assert [e.metadata_sha256 for e in merged] == [sha(50), None]  # never names a file that is not stored
    assert Upload(metadata_path(with_meta.path), meta, sha(50), meta.stat().st_size) in changes.uploads
    assert not any(u.path == metadata_path(lacking.path) for u in changes.uploads)
