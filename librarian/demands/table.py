"""The table of demands: one row per thing a wheel demands of a machine. Pure.

A row says which members the demand reads, how its need is read from them and checked against a machine,
where the filename can contradict the bytes on it (a claim) and which publish flag accepts that. The
judgement, the claims, cells and every command's rendering iterate these rows; none lists the demands
itself. A new demand is one module (``needs``, ``check``, maybe ``claims``) and one row here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from librarian.demands import cpu, cuda, glibc, gpu, python, torch
from librarian.demands import os as os_demand
from librarian.demands.base import Demand, Verdict, Wheel
from librarian.demands.members import Seen
from librarian.machine import Machine


class Sees(enum.Enum):
    """Which part of a wheel a demand reads."""

    WHEEL = "wheel"  # the whole wheel: its filename, METADATA (Python)
    NVIDIA = "nvidia"  # every member an NVIDIA machine can load, CUDA-line alternatives included
    LOADED = "loaded"  # the members the machine's CUDA line loads

    def of(self, wheel: Wheel, view: Seen) -> Wheel:
        """The wheel as this demand sees it, ``view`` being ``wheel`` as a machine's CUDA line loads it."""
        if self is Sees.WHEEL:
            return wheel
        return view.nvidia if self is Sees.NVIDIA else view.loaded


class Claimed(enum.Enum):
    """What a byte claim is about; the rows that make one name it, and the flag that accepts it."""

    PLATFORM = "platform"  # a platform tag naming another CPU or OS than the binaries
    GLIBC = "glibc"  # a manylinux tag older than the glibc the binaries need
    CUDA = "cuda"  # a label's CUDA line the device code or libcudart contradicts
    TORCH = "torch"  # a label's torch line the wheel's own Requires-Dist on torch excludes
    PYTHON = "python"  # a Python tag none of its extension modules is built for (no flag: fix the wheel)


N = TypeVar(
    "N"
)  # what a demand needs of a machine (GpuNeed, TorchNeed, ...): its ``needs`` gives it, its ``check`` takes it


@dataclass(frozen=True)
class Row(Generic[N]):
    """One demand: how it is read, judged, and contradicted. Typed by its need, so that the type checker
    holds each row's ``needs`` and ``check`` to the same need."""

    demand: Demand
    sees: Sees
    needs: Callable[[Wheel], N]
    check: Callable[[N, Machine], Verdict]
    claims: Callable[[Wheel], list[str]] | None = None  # where the filename contradicts the bytes it sees
    claimed: Claimed | None = None
    override: str = ""  # the publish flag that accepts its claims
    claims_sees: Sees = Sees.NVIDIA  # what its claims read (as the label's CUDA line loads the wheel)
    claims_need_label: bool = False  # a claim about the label: none without one

    def verdict(self, wheel: Wheel, view: Seen, machine: Machine) -> Verdict:
        """This demand's verdict on ``machine``, over the members it sees of ``wheel`` (``view``: as the
        machine's CUDA line loads it)."""
        return self.check(self.needs(self.sees.of(wheel, view)), machine)


DEMANDS: tuple[Row[Any], ...] = (
    Row(Demand.GPU, Sees.NVIDIA, gpu.needs, gpu.check),
    Row(
        Demand.TORCH,
        Sees.LOADED,
        torch.needs,
        torch.check,
        torch.claims,
        Claimed.TORCH,
        "--allow-torch-mismatch",
        claims_sees=Sees.WHEEL,
        claims_need_label=True,
    ),
    Row(
        Demand.CUDA,
        Sees.NVIDIA,
        cuda.needs,
        cuda.check,
        cuda.claims,
        Claimed.CUDA,
        "--allow-cuda-mismatch",
        claims_sees=Sees.LOADED,
        claims_need_label=True,
    ),
    Row(
        Demand.PYTHON,
        Sees.WHEEL,
        python.needs,
        python.check,
        python.claims,
        Claimed.PYTHON,
        claims_sees=Sees.LOADED,
    ),
    Row(
        Demand.CPU,
        Sees.LOADED,
        cpu.needs,
        cpu.check,
        cpu.claims,
        Claimed.PLATFORM,
        "--allow-platform-mismatch",
    ),
    Row(
        Demand.OS,
        Sees.LOADED,
        os_demand.needs,
        os_demand.check,
        os_demand.claims,
        Claimed.PLATFORM,
        "--allow-platform-mismatch",
    ),
    Row(
        Demand.GLIBC,
        Sees.LOADED,
        glibc.needs,
        glibc.check,
        glibc.claims,
        Claimed.GLIBC,
        "--allow-glibc-mismatch",
    ),
)


def demands() -> tuple[Row[Any], ...]:
    """The rows, in the order verdicts and tables list them (read at call time: a test may add one)."""
    return DEMANDS


def override_of(claimed: Claimed) -> str:
    """The publish flag that accepts a claim of this kind."""
    return next((r.override for r in demands() if r.claimed is claimed and r.override), "")


def demand_of(claimed: Claimed) -> Demand:
    """The demand whose row makes claims of this kind (the platform tag's: the CPU's row, the first)."""
    return next(r.demand for r in demands() if r.claimed is claimed)
