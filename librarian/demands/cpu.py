"""The CPU demand: every native member must be built for this CPU. One vocabulary, the one the readers and
the machine probe speak (:func:`librarian.platforms.canonical_cpu`, applied where CPUs are read)."""

from __future__ import annotations

from dataclasses import dataclass

from librarian.demands.base import Demand, Verdict, Wheel, unknown
from librarian.facts import WheelFacts
from librarian.machine import Machine
from librarian.platforms import UNIVERSAL2, parse_platform


@dataclass(frozen=True, slots=True)
class CpuNeed:
    """The CPUs a wheel's native code is for (empty: none), and where that was read."""

    cpus: frozenset[str]
    source: str  # "bytes" or "tags"

    @property
    def text(self) -> str:
        """``x86_64``, ``aarch64, x86_64``; ``any CPU`` where no native code says."""
        return ", ".join(sorted(self.cpus)) or "any CPU"


def platform_cpu(platform: str) -> str | None:
    """The CPU a platform tag names: ``manylinux_2_28_aarch64`` -> ``aarch64``, ``win_amd64`` -> ``x86_64``."""
    return parse_platform(platform).cpu


def binary_cpus(facts: WheelFacts) -> frozenset[str]:
    """The CPUs of the host-native members (loose device code runs on the GPU, not the CPU)."""
    return frozenset(b.cpu for b in facts.binaries if b.cpu and b.format.is_host)


def needs(wheel: Wheel) -> CpuNeed:
    """From the native members' bytes, else from the platform tags."""
    if wheel.facts is not None:
        return CpuNeed(binary_cpus(wheel.facts), "bytes")
    cpus = {platform_cpu(p) for p in wheel.name.platform_tag.split(".")}
    return CpuNeed(frozenset(c for c in cpus if c), "tags")


def _runs(cpu: str, have: str) -> bool:
    return cpu == have or (cpu == UNIVERSAL2 and have in ("x86_64", "aarch64"))


def check(need: CpuNeed, machine: Machine) -> Verdict:
    """Judge the CPU demand against the machine's CPU."""
    raw = machine.cpu.value
    if not need.cpus:
        return Verdict(Demand.CPU, True, need.text, raw or "unknown", "no native code")
    text = need.text
    if raw is None:
        return unknown(Demand.CPU, text, machine.cpu.reason)
    have = raw
    wrong = sorted(c for c in need.cpus if not _runs(c, have))
    if not wrong:
        return Verdict(Demand.CPU, True, text, have)
    elf_class = "wrong ELF class: ELFCLASS32" if wrong[0] in ("i686", "armv7l") and "64" in have else ""
    error = elf_class or "cannot open shared object file: No such file or directory"
    return Verdict(Demand.CPU, False, text, have, f"native code for {wrong[0]}, this CPU is {have}", error)


def claims(wheel: Wheel) -> list[str]:
    """Where a platform tag names another CPU than a native member is built for."""
    if wheel.facts is None:
        return []
    problems = []
    for plat in wheel.name.platform_tag.split("."):
        want = platform_cpu(plat)
        if want is None or want == UNIVERSAL2:
            continue
        for b in wheel.facts.binaries:
            if b.cpu and b.format.is_host and b.cpu not in (want, UNIVERSAL2):
                problems.append(f"platform {plat}, but {b.path} is {b.cpu}")
    return problems
