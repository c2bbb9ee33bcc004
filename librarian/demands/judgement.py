"""One judgement of a wheel against a machine, or against a store cell: what every command renders or acts on.

:func:`judge` decides which members load there (the loading rules of :mod:`librarian.demands.members`),
judges each of the seven demands over those members, and says what serves the GPU (which arch; SASS or
PTX). inspect, doctor, publish (cells and claims), verify, pull and retag only render or act on the
:class:`Judgement`; none of them decides a demand itself. A new demand is one module and one row in
:mod:`librarian.demands.table`. Pure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from librarian.coords import Cell, GpuArch, MajorMinor, format_version
from librarian.demands import cpu, cuda, gpu, torch
from librarian.demands.base import Demand, Verdict, Wheel
from librarian.demands.gpu import GpuMatch, Serving
from librarian.demands.members import seen
from librarian.demands.table import demands
from librarian.gpus import KnownGpu, known_gpus
from librarian.machine import Machine, Probed, TorchInfo, one_gpu_machine


class Runs(enum.Enum):
    """The overall answer, worst first."""

    NO = "does not run"
    UNKNOWN = "may run (some parts unknown)"
    PARTLY = "runs, partly"
    RUNS = "runs"


@dataclass(frozen=True, slots=True)
class Judgement:
    """A wheel judged against one machine: per demand the verdict, which members load, what serves the GPU."""

    verdicts: tuple[Verdict, ...]  # one per demand, in :class:`Demand` order
    serving: Serving | None  # None: no device code, the GPU unknown, or the wheel does not run on it
    loads: tuple[str, ...]  # the native and device-code members that load there (or may: line unknown)
    skipped: tuple[tuple[str, str], ...]  # (member, why it never loads there)
    picked: tuple[str, ...] = ()  # the CUDA-line alternatives torch's CUDA line loads
    undecided: tuple[
        str, ...
    ] = ()  # sets of alternatives no line picks yet (torch's CUDA unknown), described
    torch_binding: str = ""  # how its bytes bind it to torch: "does not link torch", "stable ABI since 2.9 ...", "imports _ZN3c10..."

    def verdict(self, demand: Demand) -> Verdict:
        """The verdict on one demand."""
        return next(v for v in self.verdicts if v.demand is demand)

    @property
    def failures(self) -> tuple[Verdict, ...]:
        """The demands that rule the wheel out."""
        return tuple(v for v in self.verdicts if v.ok is False)

    @property
    def partly(self) -> tuple[str, ...]:
        """Members that load but have no code for this GPU (the wheel runs; calls into them fail)."""
        return tuple(p for v in self.verdicts for p in v.partly)

    @property
    def runs(self) -> Runs:
        """Does not run if any demand fails; may run if any is unknown; runs, partly; runs."""
        if self.failures:
            return Runs.NO
        if any(v.ok is None for v in self.verdicts):
            return Runs.UNKNOWN
        return Runs.PARTLY if self.partly else Runs.RUNS

    @property
    def native(self) -> bool:
        """Whether machine code (SASS) serves the GPU: what files a wheel under it and what pull takes exactly."""
        return self.serving is not None and self.serving.native and self.verdict(Demand.GPU).ok is True


def judge(wheel: Wheel, machine: Machine) -> Judgement:
    """The one judgement of ``wheel`` on ``machine``: every demand of the table over the members that load
    there, and what serves the GPU."""
    view = seen(wheel, machine.cuda.value or gpu.needs(wheel).label_cuda)
    # The GPU is judged once: its verdict is the GPU row's, and it says which arch serves.
    gpu_verdict, serving = gpu.judge(gpu.needs(view.nvidia), machine)
    verdicts = tuple(
        gpu_verdict if row.demand is Demand.GPU else row.verdict(wheel, view, machine) for row in demands()
    )
    torch_need = torch.needs(view.loaded)
    return Judgement(
        verdicts, serving, view.loads, view.skipped, view.picked, view.undecided, torch_need.why()
    )


def cell_machine(cell: Cell) -> Machine:
    """The machine a store cell describes: its GPU, its torch line and that torch's CUDA line; the rest unknown."""
    torch_info = TorchInfo(format_version(cell.label.torch), cell.label.cuda)
    machine = one_gpu_machine(cell.sm.capability, "its cell", cell.label.cuda)
    return replace(machine, torch=Probed.found(torch_info, "its cell"))


def judge_cell(wheel: Wheel, cell: Cell) -> Judgement:
    """The judgement of ``wheel`` in the store cell ``cell``: what verify holds a filed wheel to."""
    return judge(wheel, cell_machine(cell))


@dataclass(frozen=True, slots=True)
class CellFit:
    """One real GPU a wheel serves natively (one of its cells), and the loaded members that lack code for it."""

    sm: GpuArch
    serving: Serving
    partly: tuple[str, ...] = ()


def platform_gpus(wheel: Wheel, cuda_line: MajorMinor | None = None) -> tuple[KnownGpu, ...]:
    """The known GPUs a machine that runs ``wheel`` can have: shipping beside its CPUs (an x86_64 or a
    Windows wheel never meets DGX Spark's sm121 or a Jetson), with a driver that runs its CUDA line
    (``cuda_line``, else the toolkit that built its device code: a CUDA 12.9 build never meets Xavier's
    sm72, whose last driver is CUDA 11.4)."""
    cpus = cpu.needs(wheel).cpus
    line = cuda_line or (wheel.facts.toolkit if wheel.facts is not None else None)
    return tuple(g for g in known_gpus() if g.ships_with(cpus) and (line is None or g.runs_cuda(line)))


def cells(wheel: Wheel, line: MajorMinor | None = None) -> tuple[CellFit, ...]:
    """Every real GPU, shipping beside the wheel's CPUs, that the judgement says the wheel runs on natively.

    These are its cells: ``sm_86`` SASS serves sm86 and sm89; ``sm_90a`` only sm90; PTX alone none.
    ``line``: the CUDA line that picks among alternatives (default: the label's).
    """
    cuda_line = line or gpu.needs(wheel).label_cuda
    view = seen(wheel, cuda_line)
    need = gpu.needs(view.nvidia)
    if need.code.empty:
        return ()
    found = []
    for real in platform_gpus(view.loaded, cuda_line):
        # Only GPUs a machine of its CPUs has, with a driver that runs its CUDA line.
        verdict, serving = gpu.judge(need, one_gpu_machine(real.capability, "cells", line))
        if verdict.ok and serving is not None and serving.match is not GpuMatch.PTX:
            found.append(CellFit(real.arch, serving, verdict.partly))
    return tuple(found)


def serves_line(wheel: Wheel, torch_line: MajorMinor, cuda_line: MajorMinor | None = None) -> str | None:
    """Why the wheel's bytes run with torch ``torch_line`` (and that torch's CUDA ``cuda_line``), or ``None``.

    The torch and CUDA demands of :func:`judge`, alone: what gc asks before it calls a torch line stale and
    what the pip pages ask before they list a wheel for another combo. A wheel built for exactly that line
    says so (``""`` is falsy: callers test ``is not None``).
    """
    version = f"{torch_line[0]}.{torch_line[1]}"
    info = TorchInfo(version, cuda_line)
    machine = Machine(
        torch=Probed.found(info, "line"),
        cuda=Probed.found(cuda_line, "line") if cuda_line else Probed.unknown("no CUDA line"),
    )
    view = seen(wheel, cuda_line or gpu.needs(wheel).label_cuda)
    verdicts = (torch.check(torch.needs(view.loaded), machine), cuda.check(cuda.needs(view.nvidia), machine))
    if any(v.ok is not True for v in verdicts if v.demand is Demand.TORCH or cuda_line is not None):
        return None
    return "; ".join(v.reason for v in verdicts if not v.exact and v.reason)


def torch_binding(wheel: Wheel) -> torch.Binding:
    """How the wheel's bytes (the members its label's CUDA line loads) bind it to torch lines."""
    view = seen(wheel, gpu.needs(wheel).label_cuda)
    return torch.needs(view.loaded).binding


def bound_to_its_torch_line(wheel: Wheel) -> bool:
    """Whether the wheel's bytes bind it to exactly its torch line (a mangled C++ torch symbol, or an
    index entry from before symbols were kept): a quick test before :func:`serves_line` on other lines."""
    return torch_binding(wheel) is torch.Binding.EXACT
