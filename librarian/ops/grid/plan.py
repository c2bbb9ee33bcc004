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
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.utils import canonicalize_name

from librarian.build_failure import BuildFailure
from librarian.build_record import Source
from librarian.coords import GpuArch, MajorMinor, format_version, package_key
from librarian.errors import BadInput, StoreError
from librarian.gpus import find_gpu
from librarian.index import Index
from librarian.layout import Layout
from librarian.ops.build.build_request import DEFAULT_GLIBC, BuildRequest
from librarian.ops.grid.plan_budget import Estimate, Rates, estimate, pack
from librarian.ops.grid.plan_history import FailedCell, failed_cells, other_source
from librarian.ops.holdings import Cell, Held, NearMiss, Spec, accepted_tags, holdings
from librarian.ops.store.failures import read_failures
from librarian.ops.store.tree import read_index_or_tree
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
    """The jobs to run (each with its estimate), what the store already holds, what no job can build, the
    cells left out for a recorded failure, and the held cells built from another source."""

    location: str
    specs: tuple[Spec, ...]
    jobs: tuple[Job, ...]
    held: tuple[Held, ...]
    unbuildable: tuple[Unbuildable, ...]
    matrix: Matrix
    near: tuple[NearMiss, ...] = ()
    estimates: tuple[Estimate, ...] = ()  # one per job, in order
    failed: tuple[FailedCell, ...] = ()
    other_source: tuple[tuple[Held, Source], ...] = ()
    sources: tuple[tuple[Spec, Source], ...] = ()  # what the jobs build, per spec

    def _jobs_json(self) -> list[dict[str, Any]]:
        jobs = [j.to_json(self.matrix) for j in self.jobs]
        for job, est in zip(jobs, self.estimates, strict=False):
            job.update({"estimate-seconds": est.seconds, "estimate-basis": est.basis})
        return jobs

    def github(self, *, split: bool = False) -> dict[str, Any]:
        """The jobs as a GitHub Actions ``strategy.matrix`` (or several, with ``split``)."""
        if not self.jobs:
            return {"include": []}  # nothing to build: a workflow skips its build job on an empty list
        return github_matrices(self._jobs_json(), split)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "repo": self.location,
            "specs": [s.text for s in self.specs],
            "jobs": self._jobs_json(),
            "held": [{**h.cell.to_json(), "path": h.path, "note": h.note} for h in self.held],
            "unbuildable": [{**u.cell.to_json(), "reason": u.reason} for u in self.unbuildable],
            "near": [{**n.cell.to_json(), "why": n.why} for n in self.near],
            "failed": [
                {**f.cell.to_json(), "path": f.failure.path, "date": f.failure.date, "why": f.failure.reason}
                for f in self.failed
            ],
            "other_source": [
                {**h.cell.to_json(), "path": h.path, "built_from": s.to_json()} for h, s in self.other_source
            ],
        }

    def render(self) -> str:
        """Per spec: a count line, then one row per job; the cells no job can build last."""
        lines: list[str] = []
        # Grouped once by spec: scanning every job per spec was quadratic (3,000 specs took 46 s).
        jobs_of: dict[tuple[str, object], list[Job]] = {}
        for j in self.jobs:
            jobs_of.setdefault((package_key(j.package or ""), j.version), []).append(j)
        held_of = collections.Counter(h.cell.spec for h in self.held)
        estimate_of = {id(j): e for j, e in zip(self.jobs, self.estimates, strict=False)}
        failed_of = collections.Counter(f.cell.spec for f in self.failed)
        for spec in self.specs:
            jobs = jobs_of.get((spec.package, spec.version), [])
            held = held_of[spec]
            missing = sum(len(j.sms) for j in jobs)
            failed = failed_of[spec]
            left = f", {failed} failed before (left out)" if failed else ""
            lines.append(
                f"{spec.display}: {held} cell(s) held, {missing} missing in {len(jobs)} job(s){left}"
            )
            rows = [("TORCH", "CUDA", "PYTHON", "PLATFORM", "TORCH_CUDA_ARCH_LIST", "ESTIMATE")]
            rows += [
                (
                    format_version(j.combo.torch),
                    format_version(j.combo.cuda),
                    str(j.combo.python),
                    j.combo.platform.value,
                    j.arch_list,
                    _duration(estimate_of[id(j)]) if id(j) in estimate_of else "",
                )
                for j in jobs
            ]
            if jobs:
                widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
                lines += [
                    "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                    for r in rows
                ]
            lines += self._near_lines(spec) + self._history_lines(spec)
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

    def _history_lines(self, spec: Spec) -> list[str]:
        """The cells a recorded failure leaves out, and the held cells built from another source."""
        lines = []
        failed: dict[str, list[FailedCell]] = {}
        for f in self.failed:
            if f.cell.spec == spec:
                failed.setdefault(f.failure.path, []).append(f)
        until = (
            "its source or toolchain changes"
            if spec in dict(self.sources)
            else ("its toolchain changes (--source compares what the jobs build)")
        )
        for path, cells in failed.items():
            record = cells[0].failure
            gpus = ", ".join(sorted({f"sm{c.cell.sm.sm}" for c in cells}))
            lines.append(
                f"  failed ({len(cells)} cell(s): {gpus}; {_combo_text(cells[0].cell)}) on {record.date}: "
                f"{record.reason} [{path}; left out until {until}, or --retry-failed]"
            )
        others = [(h, s) for h, s in self.other_source if h.cell.spec == spec]
        if others:
            built = sorted({s.describe() for _, s in others})
            mine = dict(self.sources).get(spec)
            lines.append(
                f"  built from another source ({len(others)} cell(s)): {'; '.join(built)[:300]}, not "
                f"{mine.describe() if mine else 'this one'} (--rebuild-other-source plans them again)"
            )
        return lines

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


def _duration(e: Estimate) -> str:
    h, m = divmod(round(e.seconds / 60), 60)
    return f"~{h}h{m:02d}m" if h else f"~{m}m"


def _combo_text(cell: Cell) -> str:
    c = cell.combo
    return f"torch {format_version(c.torch)} CUDA {format_version(c.cuda)} {c.python} {c.platform.value}"


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
    history: History | None = None,
) -> Plan:
    """Pure: the plan for ``specs`` over the wanted cells, given the store's index (and what it remembers
    of earlier builds: ``history``)."""
    h = history or History()
    sources = {s: h.sources[s] for s in specs if s in h.sources}
    cells, unbuildable = wanted_cells(matrix, sel, specs, sms)
    held, missing, near = holdings(index, cells, glibc)
    other = other_source(held, index, sources)
    if h.rebuild_other_source and other:
        again = {id(o[0]) for o in other}
        missing = [*missing, *(x.cell for x in held if id(x) in again)]
        held = [x for x in held if id(x) not in again]
    missing, failed = failed_cells(missing, h.failures, sources, h.retry_failed)
    jobs = group_jobs(missing, ptx, glibc)
    rates = Rates.of(index.entries)
    if h.budget is not None:
        packed = pack(jobs, rates, h.budget)
        jobs, estimates = tuple(j for j, _ in packed), tuple(e for _, e in packed)
    else:
        estimates = tuple(estimate(j, rates) for j in jobs)
    return Plan(
        location, tuple(specs), jobs, tuple(held), tuple(unbuildable), matrix, tuple(near), estimates,
        tuple(failed), tuple(other) if not h.rebuild_other_source else (), tuple(sources.items()),
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class History:
    """What plan weighs beside the index: the failure records read, the source each spec's jobs build
    (default: the release from the package index), ``--retry-failed``, ``--rebuild-other-source`` and
    ``--budget`` (seconds per job)."""

    failures: tuple[BuildFailure, ...] = ()
    sources: dict[Spec, Source] = field(default_factory=dict)
    retry_failed: bool = False
    rebuild_other_source: bool = False
    budget: int | None = None


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
    history: History | None = None,
) -> Plan:
    """Read the index (the root and the specs' shards; every shard when ``sms`` is None: the store's GPUs)
    and the specs' failure records."""
    if not specs:
        raise BadInput("plan: name at least one NAME==VERSION to build")
    keys = sorted({s.package for s in specs})
    try:
        return _plan_of(
            store, default_layout, matrix, sel, specs, sms, keys, glibc, ptx, history or History()
        )
    except NoRepo:
        # A farm's first run: the repo its first build job makes (publish --create) holds nothing yet.
        log.warning(
            "%s: no such dataset repo yet; it holds nothing, so every cell is missing", store.location
        )
        if sms is None:
            raise BadInput(f"--sm-from store: {store.location} does not exist yet; pass --sm") from None
        return make_plan(
            Index(default_layout), matrix, sel, specs, sms, location=store.location, glibc=glibc, ptx=ptx,
            history=history,
        )  # fmt: skip


def _plan_of(
    store: Store, default_layout: Layout, matrix: Matrix, sel: Selection, specs: Sequence[Spec],
    sms: Sequence[GpuArch] | None, keys: list[str], glibc: MajorMinor, ptx: bool, history: History,
) -> Plan:  # fmt: skip
    if sms is None:
        whole = read_index(store, default_layout)
        sms = store_gpus(whole)
        if not sms:
            raise BadInput(f"--sm-from store: {store.location} holds no wheels yet; pass --sm")
        index = replace(whole, entries=tuple(e for e in whole.entries if e.cell.package in keys))
    else:
        index, _ = read_index_or_tree(store, default_layout, keys)
    if not history.failures:
        try:
            history = replace(history, failures=read_failures(store, keys).failures)
        except StoreError as e:  # a store not made yet, or one that cannot list: no failure is known
            log.info("%s: no failure records read (%s)", store.location, e)
    return make_plan(index, matrix, sel, specs, sms, location=store.location, glibc=glibc, ptx=ptx,
                     history=history)  # fmt: skip
