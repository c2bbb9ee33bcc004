"""The seven demands a compiled wheel makes of a machine, one module each, and :func:`judge` over them.

Each module has the same small shape: ``needs(wheel) -> Need`` (read from the bytes' facts, or from the
filename where no bytes were read) and ``check(need, machine) -> Verdict``. Everything that judges a
wheel (inspect, doctor, publish's cells, pull's resolver, verify --deep, the filename-claim checks) goes
through these and nothing else.
"""

from __future__ import annotations

from librarian.demands import cpu, cuda, glibc, gpu, python, torch
from librarian.demands import os as os_demand
from librarian.demands.base import Demand, Verdict, Wheel
from librarian.machine import Machine

__all__ = ["Demand", "Verdict", "Wheel", "claims", "judge"]


def judge(wheel: Wheel, machine: Machine) -> tuple[Verdict, ...]:
    """One verdict per demand, in :class:`Demand` order."""
    return (
        gpu.check(gpu.needs(wheel), machine),
        torch.check(torch.needs(wheel), machine),
        cuda.check(cuda.needs(wheel), machine),
        python.check(python.needs(wheel), machine),
        cpu.check(cpu.needs(wheel), machine),
        os_demand.check(os_demand.needs(wheel), machine),
        glibc.check(glibc.needs(wheel), machine),
    )


def claims(wheel: Wheel) -> list[str]:
    """Where the wheel's filename (platform tag, CUDA label) says one thing and its bytes another."""
    found = [*cpu.claims(wheel), *os_demand.claims(wheel), *glibc.claims(wheel), *cuda.claims(wheel)]
    return list(dict.fromkeys(found))
