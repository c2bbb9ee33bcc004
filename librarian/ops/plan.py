"""plan: the build jobs whose wheels a store does not hold yet, from the matrix and the store's index.

A *cell* of a plan is one (package version, torch line, CUDA line, CPython, platform, GPU). A cell is held
when ``pull`` would find a wheel for a machine of that cell (the same judgement, so a wheel that serves
the line by its bytes, or the GPU by compatible SASS, counts). The cells not held are grouped into one
job per (package version, torch, CUDA, CPython, platform), whose ``TORCH_CUDA_ARCH_LIST`` is the GPUs it
fills. Only the root index and the named packages' shards are read (all shards with ``--sm-from store``).
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from librarian.coords import GpuArch, MajorMinor, format_version, package_key
from librarian.demands import Wheel, bound_to_its_torch_line
from librarian.errors import BadInput
from librarian.gpus import find_gpu
from librarian.index import Index, IndexEntry
from librarian.layout import Layout
from librarian.machine import Gpu, Machine, Probed, TorchInfo
from librarian.ops.build_request import DEFAULT_GLIBC, arch_list
from librarian.ops.pull import Resolution, Wants, resolve
from librarian.ops.tree import read_index_or_tree
from librarian.platforms import linux_platforms
from librarian.pytorch.matrix import Combo, Matrix, Platform, Selection, combo_job, github_matrices
from librarian.stores.base import Store, read_index
from librarian.stores.hub_errors import NoRepo

log = logging.getLogger(__name__)
__all__ = [
    "DEFAULT_GLIBC",
    "Cell",
    "Held",
    "Job",
    "NearMiss",
    "Plan",
    "Spec",
    "accepted_tags",
    "holdings",
    "make_plan",
    "plan",
]


@dataclass(frozen=True, slots=True)
class Spec:
    """``flash-attn==2.8.3``: a package and the one version to build."""

    package: str  # the index's key (pip's normalized name)
    version: Version
    text: str  # as the user wrote it, for jobs to pass to pip

    @classmethod
    def parse(cls, text: str) -> Spec:
        """``name==version``; anything else is BadInput naming the spec."""
        name, sep, version = text.strip().partition("==")
        if not sep or not name.strip() or not version.strip():
            raise BadInput(f"{text}: a build spec is NAME==VERSION (e.g. flash-attn==2.8.3)")
        try:
            parsed = Version(version.strip())
        except InvalidVersion as e:
            raise BadInput(f"{text}: {version.strip()!r} is not a version") from e
        if parsed.local is not None:
            raise BadInput(f"{text}: name the release without a local label; the label comes from the combo")
        return cls(package_key(name.strip()), parsed, f"{canonicalize_name(name.strip())}=={parsed}")

    @property
    def display(self) -> str:
        return f"{self.package} {self.version}"


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell a plan wants: a package version built for a combo, for one GPU."""

    spec: Spec
    combo: Combo
    sm: GpuArch

    def to_json(self) -> dict[str, Any]:
        c = self.combo
        return {
            "package": self.spec.package,
            "version": str(self.spec.version),
            "torch": format_version(c.torch),
            "cuda": format_version(c.cuda),
            "python": str(c.python),
            "platform": c.platform.value,
            "sm": self.sm.sm,
        }


@dataclass(frozen=True, slots=True)
class Job:
    """One build: a package version for one (torch, CUDA, CPython, platform), filling the cells ``sms``."""

    spec: Spec
    combo: Combo
    sms: tuple[GpuArch, ...]
    ptx: bool = False
    glibc: MajorMinor = DEFAULT_GLIBC  # the floor this plan counts at: the build must meet it

    @property
    def arch_list(self) -> str:
        """``8.0;8.9`` (``+PTX`` on the newest when asked): the GPUs this job fills, never empty."""
        return arch_list(self.sms, self.ptx)

    def to_json(self, matrix: Matrix) -> dict[str, Any]:
        """An Actions matrix entry: the combo's job (runner, container, torch install line) for this build."""
        job = combo_job(matrix, self.combo)
        job.pop("arch-source")
        job.update(
            {
                "package": self.spec.package,
                "version": str(self.spec.version),
                "spec": self.spec.text,
                "TORCH_CUDA_ARCH_LIST": self.arch_list,
                "cells": [f"sm{sm.sm}" for sm in self.sms],
                "glibc": format_version(self.glibc),
            }
        )
        return job


@dataclass(frozen=True, slots=True)
class Held:
    """A wanted cell the store already holds, and the wheel pull would take for it."""

    cell: Cell
    path: str
    note: str = ""  # why a wheel built for another line or GPU serves it


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A wanted cell the store does not hold though it has that release, and why its nearest wheel misses."""

    cell: Cell
    why: str  # pull's words: "kern-1.0+...whl (sm80): glibc: needs GLIBC_2.32, glibc here is 2.28"


@dataclass(frozen=True, slots=True)
class Unbuildable:
    """A wanted cell no job can fill, and why (its CUDA line cannot target that GPU)."""

    cell: Cell
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    """The jobs to run, what the store already holds, and what no job can build."""

    location: str
    specs: tuple[Spec, ...]
    jobs: tuple[Job, ...]
    held: tuple[Held, ...]
    unbuildable: tuple[Unbuildable, ...]
    matrix: Matrix
    near: tuple[NearMiss, ...] = ()

    def github(self, *, split: bool = False) -> dict[str, Any]:
        """The jobs as a GitHub Actions ``strategy.matrix`` (or several, with ``split``)."""
        if not self.jobs:
            return {"include": []}  # nothing to build: a workflow skips its build job on an empty list
        return github_matrices([j.to_json(self.matrix) for j in self.jobs], split)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "repo": self.location,
            "specs": [s.text for s in self.specs],
            "jobs": [j.to_json(self.matrix) for j in self.jobs],
            "held": [{**h.cell.to_json(), "path": h.path, "note": h.note} for h in self.held],
            "unbuildable": [{**u.cell.to_json(), "reason": u.reason} for u in self.unbuildable],
            "near": [{**n.cell.to_json(), "why": n.why} for n in self.near],
        }

    def render(self) -> str:
        """Per spec: a count line, then one row per job; the cells no job can build last."""
        lines: list[str] = []
        # Grouped once by spec: scanning every job per spec was quadratic (3,000 specs took 46 s).
        jobs_of: dict[object, list[Job]] = {}
        for j in self.jobs:
            jobs_of.setdefault(j.spec, []).append(j)
        held_of = collections.Counter(h.cell.spec for h in self.held)
        for spec in self.specs:
            jobs = jobs_of.get(spec, [])
            held = held_of[spec]
            missing = sum(len(j.sms) for j in jobs)
            lines.append(f"{spec.display}: {held} cell(s) held, {missing} missing in {len(jobs)} job(s)")
            rows = [("TORCH", "CUDA", "PYTHON", "PLATFORM", "TORCH_CUDA_ARCH_LIST")]
            rows += [
                (
                    format_version(j.combo.torch),
                    format_version(j.combo.cuda),
                    str(j.combo.python),
                    j.combo.platform.value,
                    j.arch_list,
                )
                for j in jobs
            ]
            if jobs:
                widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
                lines += [
                    "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                    for r in rows
                ]
            lines += self._near_lines(spec)
        # One line per (GPU, CUDA line): the reason is the same for every torch line and Python.
        groups: dict[tuple[GpuArch, MajorMinor, str], list[Cell]] = {}
        for u in self.unbuildable:
            groups.setdefault((u.cell.sm, u.cell.combo.cuda, u.reason), []).append(u.cell)
        for (sm, cuda, reason), group in sorted(
            groups.items(), key=lambda kv: (kv[0][0].capability, kv[0][1])
        ):
            torches = ", ".join(format_version(t) for t in sorted({c.combo.torch for c in group}))
            lines.append(
                f"cannot be built: sm{sm.sm} with CUDA {format_version(cuda)} (torch {torches}; "
                f"{len(group)} cell(s)): {reason}"
            )
        return "\n".join(lines)

    def _near_lines(self, spec: Spec) -> list[str]:
        """Why the stored wheels of this release hold none of the missing cells: one line per reason."""
        groups: dict[str, list[Cell]] = {}
        for n in self.near:
            if n.cell.spec == spec:
                groups.setdefault(n.why, []).append(n.cell)
        return [
            f"  not held ({len(cells)} cell(s): {', '.join(sorted({f'sm{c.sm.sm}' for c in cells}))}): {why}"
            for why, cells in groups.items()
        ]


# --- pure: the wanted cells, and which the index holds ----------------------------------------------


def wanted_cells(
    matrix: Matrix, sel: Selection, specs: Sequence[Spec], sms: Iterable[GpuArch]
) -> tuple[list[Cell], list[Unbuildable]]:
    """Every (spec, combo, GPU) the selection wants, and those no build of their CUDA line can fill.

    A GPU that never ships beside the platform's CPU (a Jetson and an x86_64 wheel) is no cell at all.
    """
    gpus = sorted({sm for sm in sms}, key=lambda a: a.capability)
    cells: list[Cell] = []
    unbuildable: list[Unbuildable] = []
    for combo in matrix.select(sel):
        for sm in gpus:
            real = find_gpu(sm.capability)
            if real is None or not real.ships_with(frozenset({combo.platform.cpu})):
                continue
            for spec in specs:
                cell = Cell(spec, combo, sm)
                if real.compiled_by(combo.cuda):
                    cells.append(cell)
                else:
                    why = (
                        f"CUDA {format_version(combo.cuda)} cannot target sm_{sm.sm} ({real.toolkits()} can)"
                    )
                    unbuildable.append(Unbuildable(cell, why))
    return cells, unbuildable


@functools.lru_cache(maxsize=256)
def _tags(python: str, platform: Platform, glibc: MajorMinor) -> tuple[Tag, ...]:
    """The tags a CPython (``cp312``, ``cp314t``) accepts on a platform, as pip orders them."""
    major, minor, free = int(python[2]), int(python[3:].rstrip("t")), python.endswith("t")
    if platform is Platform.WINDOWS_AMD64:
        plats: tuple[str, ...] = ("win_amd64",)
    else:
        plats = linux_platforms(glibc, platform.cpu)
    abis = [python] if free else None  # free-threaded: its own ABI only (no abi3)
    return (
        *cpython_tags((major, minor), abis=abis, platforms=plats),
        *compatible_tags((major, minor), f"cp{major}{minor}", plats),
    )


def cell_wants(cell: Cell, glibc: MajorMinor) -> Wants:
    """The machine of a cell, as pull would be told it by flags."""
    c = cell.combo
    tags = _tags(str(c.python), c.platform, glibc)
    linux = c.platform is not Platform.WINDOWS_AMD64
    machine = Machine(
        gpus=Probed.found((Gpu(0, f"sm{cell.sm.sm}", cell.sm.capability),), "plan"),
        torch=Probed.found(TorchInfo(f"{format_version(c.torch)}.0", c.cuda), "plan"),
        cuda=Probed.found(c.cuda, "plan"),
        python_tags=Probed.found(tags, "plan"),
        python=Probed.found((c.python.major, c.python.minor), "plan"),
        glibc=Probed.found(glibc, "plan") if linux else Probed.unknown("no glibc on Windows"),
        cpu=Probed.found(c.platform.cpu, "plan"),
        os=Probed.found("linux" if linux else "win32", "plan"),
    )
    return Wants.of(machine)


def _bound(entry: IndexEntry) -> bool:
    """Whether the entry's bytes bind it to exactly its own torch line (then no other line can take it)."""
    return bound_to_its_torch_line(Wheel(entry.name, entry.facts, entry.requires_python_spec, entry.cell.sm))


def holdings(
    index: Index, cells: Sequence[Cell], glibc: MajorMinor
) -> tuple[list[Held], list[Cell], list[NearMiss]]:
    """Pure: which cells the index holds (pull's resolution, exact mode), which it does not, and why the
    nearest stored wheel of the release misses each it does not. ``build`` asks the same of its wheel."""
    # Per entry, once: its tags and whether its bytes bind it to its own torch line.
    by_spec: dict[Spec, list[tuple[IndexEntry, frozenset[Tag], bool]]] = {}
    for spec in {c.spec for c in cells}:
        by_spec[spec] = [
            (e, e.name.tags, _bound(e))
            for e in index.for_package(spec.package)
            if Version(e.name.version.public) == spec.version
        ]
    held: list[Held] = []
    missing: list[Cell] = []
    near: list[NearMiss] = []
    for cell in cells:
        accepted = accepted_tags(str(cell.combo.python), cell.combo.platform, glibc)
        # Judge only wheels pull could take: tags this interpreter accepts, and not bound by their bytes to
        # another torch line (the two cheap tests; the judgement decides the rest).
        candidates = [
            e
            for e, tags, bound in by_spec[cell.spec]
            if not accepted.isdisjoint(tags) and (not bound or e.cell.label.torch == cell.combo.torch)
        ]
        found = resolve(candidates, cell.spec.package, cell_wants(cell, glibc)) if candidates else None
        pick = found.pick if found is not None else None
        if pick is None:
            missing.append(cell)
            if by_spec[cell.spec]:
                near.append(NearMiss(cell, _why_not(found, by_spec[cell.spec], cell)))
            continue
        same = pick.cell.label == cell.combo.label and pick.cell.sm == cell.sm
        note = "" if same else f"built for {pick.cell.label}, filed under sm{pick.cell.sm.sm}"
        held.append(Held(cell, pick.path, note))
    return held, missing, near


def _why_not(
    found: Resolution | None, stored: Sequence[tuple[IndexEntry, frozenset[Tag], bool]], cell: Cell
) -> str:
    """The nearest miss in pull's words; where no stored wheel of the release was even judged, why."""
    if found is not None and found.near:
        return str(found.near[0])
    c = cell.combo
    names = ", ".join(sorted({e.filename for e, _, _ in stored}))[:200]
    return f"{names}: tags for no {c.python} {c.platform.value} interpreter, or bound to another torch line"


@functools.lru_cache(maxsize=256)
def accepted_tags(python: str, platform: Platform, glibc: MajorMinor) -> frozenset[Tag]:
    return frozenset(_tags(python, platform, glibc))


def group_jobs(
    missing: Iterable[Cell], ptx: bool = False, glibc: MajorMinor = DEFAULT_GLIBC
) -> tuple[Job, ...]:
    """Pure: one job per (spec, combo), filling its missing GPUs, oldest first."""
    groups: dict[tuple[Spec, Combo], list[GpuArch]] = {}
    for cell in missing:
        groups.setdefault((cell.spec, cell.combo), []).append(cell.sm)
    jobs = [
        Job(spec, combo, tuple(sorted(set(sms), key=lambda a: a.capability)), ptx, glibc)
        for (spec, combo), sms in groups.items()
    ]
    return tuple(sorted(jobs, key=lambda j: (j.spec.text, j.combo.key)))


def make_plan(
    index: Index,
    matrix: Matrix,
    sel: Selection,
    specs: Sequence[Spec],
    sms: Iterable[GpuArch],
    *,
    location: str,
    glibc: MajorMinor = DEFAULT_GLIBC,
    ptx: bool = False,
) -> Plan:
    """Pure: the plan for ``specs`` over the wanted cells, given the store's index."""
    cells, unbuildable = wanted_cells(matrix, sel, specs, sms)
    held, missing, near = holdings(index, cells, glibc)
    jobs = group_jobs(missing, ptx, glibc)
    return Plan(location, tuple(specs), jobs, tuple(held), tuple(unbuildable), matrix, tuple(near))


# --- the I/O part -----------------------------------------------------------------------------------


def store_gpus(index: Index) -> tuple[GpuArch, ...]:
    """The GPUs the store serves: every cell's GPU, across every package."""
    return tuple(sorted({e.cell.sm for e in index.entries}, key=lambda a: a.capability))


def plan(
    store: Store,
    default_layout: Layout,
    matrix: Matrix,
    sel: Selection,
    specs: Sequence[Spec],
    sms: Sequence[GpuArch] | None,
    *,
    glibc: MajorMinor = DEFAULT_GLIBC,
    ptx: bool = False,
) -> Plan:
    """Read the index (the root and the specs' shards; every shard when ``sms`` is None: the store's GPUs)."""
    if not specs:
        raise BadInput("plan: name at least one NAME==VERSION to build")
    keys = sorted({s.package for s in specs})
    try:
        return _plan_of(store, default_layout, matrix, sel, specs, sms, keys, glibc, ptx)
    except NoRepo:
        # A farm's first run: the repo its first build job makes (publish --create) holds nothing yet.
        log.warning(
            "%s: no such dataset repo yet; it holds nothing, so every cell is missing", store.location
        )
        if sms is None:
            raise BadInput(f"--sm-from store: {store.location} does not exist yet; pass --sm") from None
        return make_plan(
            Index(default_layout), matrix, sel, specs, sms, location=store.location, glibc=glibc, ptx=ptx
        )


def _plan_of(
    store: Store, default_layout: Layout, matrix: Matrix, sel: Selection, specs: Sequence[Spec],
    sms: Sequence[GpuArch] | None, keys: list[str], glibc: MajorMinor, ptx: bool,
) -> Plan:  # fmt: skip
    if sms is None:
        whole = read_index(store, default_layout)
        sms = store_gpus(whole)
        if not sms:
            raise BadInput(f"--sm-from store: {store.location} holds no wheels yet; pass --sm")
        index = replace(whole, entries=tuple(e for e in whole.entries if e.cell.package in keys))
    else:
        index, _ = read_index_or_tree(store, default_layout, keys)
    return make_plan(index, matrix, sel, specs, sms, location=store.location, glibc=glibc, ptx=ptx)
