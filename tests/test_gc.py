"""gc policies: the pure plan with explicit indexes, and the scheduled-job scenario end to end."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label
from librarian.index import Index, IndexEntry
from librarian.ops.store.gc import plan_gc
from librarian.ops.store.gc_policy import GcPolicy
from tests.builders import make_wheel, torch_extension_so
from tests.conftest import Run

NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)
EXT = {"tinykern/__init__.py": b"", "tinykern/_C.so": torch_extension_so()}  # bound to its torch line


def entry(
    torch: str = "2.9",
    version: str = "1.0",
    sm: str = "89",
    py: str = "cp312",
    added: str = "2026-11-01T00:00:00Z",
) -> IndexEntry:
    label = Label.parse(f"cu128torch{torch}")
    cell = Cell("pkg", GpuArch.parse(sm), label)
    filename = f"pkg-{version}+{label}-{py}-{py}-linux_x86_64.whl"
    return IndexEntry(load_layout().path_for(cell, filename), "0" * 64, 10, cell, added)


def index(*entries: IndexEntry) -> Index:
    return Index(load_layout()).with_entries(entries)


def removed(idx: Index, policy: GcPolicy) -> set[str]:
    return {r.entry.path for r in plan_gc(idx, policy)}


def test_keep_torch_keeps_the_newest_lines() -> None:
    entries = [entry(t) for t in ("2.5", "2.6", "2.7", "2.8", "2.9")]
    plan = plan_gc(index(*entries), GcPolicy(keep_torch=3, now=NOW))
    assert {r.entry.path for r in plan} == {entries[0].path, entries[1].path}
    assert all("not among the newest 3 (2.9, 2.8, 2.7)" in r.reason for r in plan)


def test_keep_versions_per_cell_and_python() -> None:
    old, mid, new = entry(version="1.0"), entry(version="1.1"), entry(version="1.2")
    other_py = entry(version="1.0", py="cp311")
    assert removed(index(old, mid, new, other_py), GcPolicy(keep_versions=2, now=NOW)) == {old.path}
    assert removed(index(old, mid, new, other_py), GcPolicy(keep_versions=1, now=NOW)) == {old.path, mid.path}


def test_older_than_never_empties_a_kept_line() -> None:
    a = entry(version="1.0", added="2026-01-01T00:00:00Z")
    b = entry(version="1.1", added="2026-02-01T00:00:00Z")
    fresh_other = entry(version="1.0", sm="90", added="2026-11-29T00:00:00Z")
    plan = removed(index(a, b, fresh_other), GcPolicy(older_than_days=30, now=NOW))
    assert plan == {a.path}  # b is the last of its (package, sm, python, platform): kept
    dropped = removed(index(a, b), GcPolicy(older_than_days=30, drop_torch=((2, 9),), now=NOW))
    assert dropped == {a.path, b.path}  # a dropped line may lose everything


def test_policies_combine() -> None:
    e = [entry("2.7"), entry("2.8", version="1.0"), entry("2.8", version="1.1"), entry("2.9")]
    assert removed(index(*e), GcPolicy(keep_torch=2, keep_versions=1, now=NOW)) == {e[0].path, e[1].path}


def test_scheduled_gc_scenario(run: Run, tmp_path: Path) -> None:
    for torch in ("2.5", "2.6", "2.7", "2.8", "2.9"):
        wheel = make_wheel(tmp_path / "dist" / torch, "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", EXT)
        cuda = "12.4" if torch in ("2.5", "2.6") else "12.8"
        assert run("publish", str(wheel), "--sm", "89", "--torch", torch, "--cuda", cuda).code == 0
    house = tmp_path / "wheelhouse"
    before = sorted(p.relative_to(house).as_posix() for p in house.rglob("*.whl"))
    plan = run("gc", "--keep-torch", "3")
    assert plan.code == 0
    planned = [line.split()[1] for line in plan.out.splitlines() if line.startswith("remove  ")]
    assert [p.split("/")[2] for p in planned] == ["torch2.5-cu124", "torch2.6-cu124"]
    assert sorted(p.relative_to(house).as_posix() for p in house.rglob("*.whl")) == before
    done = run("gc", "--keep-torch", "3", "--yes")
    assert done.code == 0 and "removed 2 wheel file(s)" in done.out
    left = sorted(p.relative_to(house).as_posix() for p in house.rglob("*.whl"))
    assert [p.split("/")[2] for p in left] == ["torch2.7-cu128", "torch2.8-cu128", "torch2.9-cu128"]
    pages = sorted(p.name for p in (house / "pages").iterdir() if p.suffix == ".html")
    assert pages == ["sm89-torch2.7-cu128.html", "sm89-torch2.8-cu128.html", "sm89-torch2.9-cu128.html"]
    simple = sorted(p.name for p in (house / "pages").iterdir() if p.is_dir())  # their PEP 503 trees alike
    assert simple == ["sm89-torch2.7-cu128", "sm89-torch2.8-cu128", "sm89-torch2.9-cu128"]
    assert run("verify").code == 0
    again = run("gc", "--keep-torch", "3", "--yes")
    assert again.code == 0 and "removed 0 wheel file(s)" in again.out


def test_keep_torch_can_count_the_lines_pytorch_shipped() -> None:
    entries = [entry(t) for t in ("2.7", "2.8", "2.9")]
    shipped = ((2, 7), (2, 8), (2, 9), (2, 10), (2, 11))
    plan = plan_gc(index(*entries), GcPolicy(keep_torch=3, lines=shipped, now=NOW))
    assert {r.entry.path for r in plan} == {e.path for e in entries[:2]}
    assert "not among the newest 3 PyTorch shipped (2.11, 2.10, 2.9)" in plan[0].reason


def test_keep_torch_from_matrix_on_the_command_line(run: Run, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", EXT)
    assert run("publish", str(wheel), "--sm", "89", "--torch", "2.4", "--cuda", "12.4").code == 0
    assert "remove 0 wheel" in run("gc", "--keep-torch", "3").out
    plan = run("gc", "--keep-torch", "3", "--keep-torch-from", "matrix")
    assert plan.code == 0 and "remove 1 wheel" in plan.out and "PyTorch shipped" in plan.out
    bad = run("gc", "--keep-torch", "3", "--keep-torch-from", "moon")
    assert bad.code == 2 and "expected 'store' or 'matrix'" in bad.err
