"""Builders shared by the demand tests: facts, wheels and machines made by hand (no probing, no GPU)."""

from __future__ import annotations

from librarian.coords import GpuArch, WheelName
from librarian.demands import Demand, Verdict, Wheel, judge
from librarian.demands.table import DEMANDS
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.machine import Machine, Probed

NAME = "kern-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl"


def arch(text: str) -> GpuArch:
    return GpuArch.parse(text)


def so(path: str = "kern/_C.so", **kw: object) -> BinaryFacts:
    kw.setdefault("cpu", "x86_64")
    for key in ("sass", "ptx"):
        kw[key] = tuple(sorted(arch(a) for a in str(kw.get(key, "")).split()))
    return BinaryFacts(path, kw.pop("format", BinaryFormat.ELF), **kw)  # type: ignore[arg-type]


def wheel(*binaries: BinaryFacts, name: str = NAME) -> WheelFacts:
    return WheelFacts(name, binaries)


def machine(
    sm: str | None = "89",
    driver: str | None = "12.8",
    torch: str | None = "2.8",
    cuda: str | None = "12.8",
    python: str = "3.12",
    glibc: str = "2.35",
    cpu: str = "x86_64",
    os: str = "linux",
    glibcxx: tuple[int, ...] | None = (3, 4, 30),
) -> Machine:
    base = Machine(
        cpu=Probed.found(cpu, "test"),
        os=Probed.found(os, "test"),
        glibcxx=Probed.found(glibcxx, "test") if glibcxx else Probed.unknown("libstdc++.so.6 not found"),
    )
    return base.with_overrides(sm=sm, driver=driver, torch=torch, cuda=cuda, python=python, glibc=glibc)


def verdict_for(demand: Demand, facts: WheelFacts, m: Machine, name: str = NAME) -> Verdict:
    verdicts = judge(Wheel(WheelName.parse(name), facts), m).verdicts
    assert [v.demand for v in verdicts] == [row.demand for row in DEMANDS]  # one verdict per row, in order
    return next(v for v in verdicts if v.demand is demand)
