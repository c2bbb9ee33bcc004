"""plan: the build jobs whose wheels a store does not hold yet, from the matrix and the store's index.

A *cell* of a plan is one (package version, torch line, CUDA line, CPython, platform, GPU). A cell is held
when ``pull`` would find a wheel for a machine of that cell (the same judgement, so a wheel that serves
the line by its bytes, or the GPU by compatible SASS, counts). The cells not held are grouped into one
job per (package version, torch, CUDA, CPython, platform), whose ``TORCH_CUDA_ARCH_LIST`` is the GPUs it
fills. Only the root index and the named packages' shards are read (all shards with ``--sm-from store``).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.utils import canonicalize_name

from librarian.coords import GpuArch, MajorMinor, format_version, package_key
from librarian.errors import BadInput
from librarian.gpus import find_gpu
from librarian.index import Index
from librarian.layout import Layout
from librarian.ops.build_request import DEFAULT_GLIBC, BuildRequest
from librarian.ops.holdings import Cell, Held, NearMiss, Spec, accepted_tags, holdings
from librarian.ops.tree import read_index_or_tree
from librarian.pytorch.matrix import Combo, Matrix, Selection
from librarian.pytorch.matrix_render import github_matrices
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


# One build, as plan groups the missing cells and as ``build --job`` takes it back: one value, one type.
Job = BuildRequest


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
        jobs_of: dict[tuple[str, object], list[Job]] = {}
        for j in self.jobs:
            jobs_of.setdefault((package_key(j.package or ""), j.version), []).append(j)
        held_of = collections.Counter(h.cell.spec for h in self.held)
        for spec in self.specs:
            jobs = jobs_of.get((spec.package, spec.version), [])
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


def group_jobs(
    missing: Iterable[Cell], ptx: bool = False, glibc: MajorMinor = DEFAULT_GLIBC
) -> tuple[Job, ...]:
    """Pure: one job per (spec, combo), filling its missing GPUs, oldest first."""
    groups: dict[tuple[Spec, Combo], list[GpuArch]] = {}
    for cell in missing:
        groups.setdefault((cell.spec, cell.combo), []).append(cell.sm)
    jobs = [
        BuildRequest(
            spec.text,
            combo,
            tuple(sorted(set(sms), key=lambda a: a.capability)),
            ptx,
            glibc,
            canonicalize_name(spec.package),
            spec.version,
        )
        for (spec, combo), sms in groups.items()
    ]
    return tuple(sorted(jobs, key=lambda j: (j.spec, j.combo.key)))


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
