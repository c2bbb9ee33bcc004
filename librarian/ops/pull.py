"""pull: find the exact wheel for a machine in a store, fetch it sha256-checked, optionally install it.

Resolution is pure (``resolve``): the machine's wants against the index's entries. Only the root index
and the asked packages' shards are read.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.tags import Tag

from librarian.coords import GpuArch, MajorMinor, format_cuda, format_version, package_key
from librarian.errors import BadInput, LibrarianError, NotFound, Refused, StoreError
from librarian.facts import facts_from_json
from librarian.index import IndexEntry
from librarian.layout import Layout
from librarian.machine import Machine
from librarian.ops.reindex import read_index_or_tree
from librarian.stores.base import Store
from librarian.verdict import GpuMatch, gpu_match
from librarian.wheelfile import check_wheel_identity

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Wants:
    """What the machine needs: a GPU, a torch line (and CUDA line, if known), interpreter tags."""

    sm: GpuArch
    torch: MajorMinor
    cuda: MajorMinor | None
    tags: tuple[Tag, ...]  # most preferred first, as packaging.tags.sys_tags() orders them
    driver: MajorMinor | None = None  # the driver's CUDA version, for PTX JIT (--compatible)

    def describe(self) -> str:
        """``sm89, torch 2.9, cu128, cp312``."""
        cuda = f", cu{format_cuda(self.cuda)}" if self.cuda else ""
        python = self.tags[0].interpreter if self.tags else "?"
        return f"sm{self.sm.sm}, torch {format_version(self.torch)}{cuda}, {python}"


@dataclass(frozen=True, slots=True)
class Near:
    """A candidate that does not fit, and every way it differs."""

    entry: IndexEntry
    differences: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.entry.filename} (sm{self.entry.cell.sm.sm}): {'; '.join(self.differences)}"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The pick for one package, or the nearest misses when nothing fits."""

    package: str
    pick: IndexEntry | None
    near: tuple[Near, ...] = ()
    note: str = ""
    hint: str = ""  # on a miss: a wheel that --compatible would take


@functools.lru_cache(maxsize=8)
def _ranks(tags: tuple[Tag, ...]) -> dict[Tag, int]:
    # ~900 tags for a CPython on Linux: built once per machine, not once per candidate wheel.
    return {tag: i for i, tag in enumerate(tags)}


def _tag_rank(entry: IndexEntry, tags: tuple[Tag, ...]) -> int | None:
    ranks = _ranks(tags)
    found = [ranks[t] for t in entry.name.tags if t in ranks]
    return min(found) if found else None


def differences(entry: IndexEntry, wants: Wants) -> tuple[str, ...]:
    """Pure: each demand of ``entry`` that ``wants`` does not meet, said plainly."""
    diffs = []
    cell = entry.cell
    if cell.sm != wants.sm:
        diffs.append(_gpu_difference(entry, wants))
    if cell.label.torch != wants.torch:
        diffs.append(
            f"another torch line: {format_version(cell.label.torch)}, not {format_version(wants.torch)}"
        )
    if wants.cuda is not None and cell.label.cuda != wants.cuda:
        diffs.append(f"another CUDA line: cu{format_cuda(cell.label.cuda)}, not cu{format_cuda(wants.cuda)}")
    if _tag_rank(entry, wants.tags) is None:
        name = entry.name
        mine = wants.tags[0] if wants.tags else None
        here = f"{mine.interpreter}-{mine.abi}-{mine.platform}" if mine else "unknown"
        pythons = {t.interpreter for t in name.tags}
        if (
            mine is not None
            and mine.interpreter not in pythons
            and not any(t.interpreter.startswith("py") for t in name.tags)
        ):
            diffs.append(f"another Python: {name.python_tag}, this interpreter is {mine.interpreter}")
        else:
            diffs.append(f"tags {name.tag_text} do not fit this platform ({here})")
    return tuple(diffs)


def gpu_fit(entry: IndexEntry, wants: Wants) -> GpuMatch | None:
    """Pure: how well ``entry`` serves the wanted GPU by DESIGN.md's rules (worst over its device code)."""
    if entry.facts is None or not entry.facts.get("binaries"):
        found = gpu_match([entry.cell.sm], wants.sm.capability, wants.driver)
        return None if found is None else found[0]
    facts = facts_from_json(entry.filename, entry.facts)
    worst = GpuMatch.EXACT
    for binary in facts.device_binaries:
        found = gpu_match((*binary.sass, *binary.ptx), wants.sm.capability, wants.driver, binary.toolkit)
        if found is None:
            return None
        worst = max(worst, found[0])
    return worst


_HOW = {
    GpuMatch.EXACT: "its own SASS",
    GpuMatch.SASS: "compatible SASS",
    GpuMatch.PTX: "PTX (JIT-compiled at first use)",
}


def best_compatible(entries: Sequence[IndexEntry], wants: Wants) -> tuple[GpuMatch, IndexEntry] | None:
    """Pure: the best wheel that differs only by GPU and runs on it anyway: SASS over PTX, then newest."""
    scored = []
    for e in entries:
        if set(differences(e, wants)) - {_gpu_difference(e, wants)}:
            continue  # only the GPU may differ
        if (fit := gpu_fit(e, wants)) is not None:
            scored.append((fit, e))
    if not scored:
        return None
    fit = min(f for f, _ in scored)
    # Same match quality: the newest version, then the arch nearest the GPU, then the best tag.
    best = max(
        (e for f, e in scored if f == fit),
        key=lambda e: (e.name.version, e.cell.sm.number, -(_tag_rank(e, wants.tags) or 0)),
    )
    return fit, best


def _how(fit: GpuMatch, wants: Wants) -> str:
    unchecked = fit is GpuMatch.PTX and wants.driver is None
    return _HOW[fit] + (" (driver not checked; pass --driver)" if unchecked else "")


def resolve_compatible(entries: Sequence[IndexEntry], package: str, wants: Wants) -> Resolution | None:
    """Pure: with no exact cell, the best wheel that runs on this GPU anyway, with a note that says how."""
    if (found := best_compatible(entries, wants)) is None:
        return None
    fit, best = found
    how = _how(fit, wants)
    note = f"{package}: no sm{wants.sm.sm} wheel; took the sm{best.cell.sm.sm} one, which runs here by {how}"
    return Resolution(package, best, note=note)


def _gpu_difference(entry: IndexEntry, wants: Wants) -> str:
    return f"built for GPU sm{entry.cell.sm.sm}, this GPU is sm{wants.sm.sm}"


def resolve(
    entries: Sequence[IndexEntry], package: str, wants: Wants, *, compatible: bool = False
) -> Resolution:
    """Pure: the newest exact match for ``wants``; or the nearest candidates with what differs."""
    fits = [e for e in entries if not differences(e, wants)]
    note = ""
    if fits:
        cudas = {e.cell.label.cuda for e in fits}
        if wants.cuda is None and len(cudas) > 1:
            newest = max(cudas)
            note = f"{package}: several CUDA lines fit ({', '.join('cu' + format_cuda(c) for c in sorted(cudas))}); took cu{format_cuda(newest)} (pass --cuda to choose)"
            fits = [e for e in fits if e.cell.label.cuda == newest]
        best = max(fits, key=lambda e: (e.name.version, -(_tag_rank(e, wants.tags) or 0)))
        return Resolution(package, best, note=note)
    if compatible and (found := resolve_compatible(entries, package, wants)) is not None:
        return found
    near = sorted(
        (Near(e, differences(e, wants)) for e in entries), key=lambda n: (len(n.differences), n.entry.path)
    )
    hint = ""
    if not compatible and (alt := best_compatible(entries, wants)) is not None:
        fit, entry = alt
        how, where = _how(fit, wants), f"{entry.filename} (sm{entry.cell.sm.sm})"
        hint = f"{package}: {where} runs here by {how}; pass --compatible to take it"
    return Resolution(package, None, tuple(near[:5]), hint=hint)


def _fetch_checked(store: Store, entry: IndexEntry, out_dir: Path) -> Path:
    """Fetch to a temp name, check sha256 against the index, then rename into place."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / entry.filename
    partial = out_dir / f".{entry.filename}.partial"
    try:
        store.fetch(entry.path, partial)
        digest = hashlib.sha256()
        with partial.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != entry.sha256:
            raise StoreError(f"{entry.path}: downloaded bytes do not match the index's sha256; refused")
        check_wheel_identity(partial, entry)  # the bytes are the entry's; are they the wheel it names?
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
    return final


def pull(
    store: Store,
    default_layout: Layout,
    packages: Sequence[str],
    wants: Wants,
    out_dir: Path,
    *,
    compatible: bool = False,
) -> tuple[list[Resolution], list[Path]]:
    """Resolve every package and fetch the picks; raises NotFound (exit 1) if any package has no fit."""
    if not packages:
        raise BadInput("pull: name at least one package")
    keys = [package_key(p) for p in packages]
    index, listed = read_index_or_tree(store, default_layout, keys)
    resolutions = [resolve(index.for_package(k), k, wants, compatible=compatible) for k in keys]
    if listed:  # no index.json: the tree was listed instead; say so once, with the first package
        resolutions[0] = replace(resolutions[0], note="; ".join(filter(None, (listed, resolutions[0].note))))
    missing = [r for r in resolutions if r.pick is None]
    if missing:
        raise NoMatch(store.location, wants, tuple(missing))
    files = [_fetch_checked(store, r.pick, out_dir) for r in resolutions if r.pick is not None]
    return resolutions, files


class NoMatch(NotFound):
    """No stored wheel fits; carries the near candidates for the message."""

    def __init__(self, location: str, wants: Wants, misses: tuple[Resolution, ...]) -> None:
        self.wants = wants
        self.misses = misses
        names = ", ".join(r.package for r in misses)
        super().__init__(f"{names}: no wheel in {location} for {wants.describe()}")

    def details(self) -> list[str]:
        """The lines that explain each miss (the CLI prints them after the error line)."""
        lines = []
        for r in self.misses:
            if not r.near:
                lines.append(f"  {r.package}: not in the store at all")
            for near in r.near:
                lines.append(f"  {near}")
            lines.extend(f"  {what}: {text}" for what, text in (("note", r.note), ("hint", r.hint)) if text)
        return lines


def check_runs(files: Sequence[Path], machine: Machine, *, force: bool = False) -> None:
    """Refuse to install a wheel whose verdicts say it will not run on ``machine`` (unless ``force``)."""
    from librarian.ops.doctor import doctor

    for path in files:
        report = doctor(path, machine)
        if report.runs is False and not force:
            first = report.failures[0]
            raise Refused(f"{path.name}: will not run here ({first}); pass --force to install it anyway")


def install(files: Sequence[Path]) -> None:
    """``python -m pip install --force-reinstall --no-deps`` the pulled wheels (keeps the pinned torch)."""
    cmd = [sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", *map(str, files)]
    log.info("running %s", " ".join(cmd))
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise LibrarianError(f"pip install: exited with status {result.returncode}")
