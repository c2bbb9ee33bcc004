"""The glibc demand: the C libraries here must define the newest ``GLIBC_``/``GLIBCXX_`` versions needed.

Otherwise the loader fails with ``version 'GLIBC_2.35' not found``. Floors are exact (``GLIBC_2.2.5``).
A ``manylinux_2_28`` tag promises a floor of 2.28; bytes that need more contradict it.
"""

from __future__ import annotations

from dataclasses import dataclass

from librarian.coords import format_dotted
from librarian.demands.base import Demand, Verdict, Wheel, unknown
from librarian.machine import Machine, format_glibcxx
from librarian.platforms import glibc_baseline, parse_platform


@dataclass(frozen=True, slots=True)
class GlibcNeed:
    """The highest glibc and libstdc++ symbol versions needed, and where the floor was read."""

    glibc: tuple[int, ...] | None
    glibcxx: tuple[int, ...] | None = None
    source: str = "bytes"  # "bytes" or "tags" (a manylinux tag's promise)

    @property
    def text(self) -> str:
        """``GLIBC_2.28, GLIBCXX_3.4.30``."""
        parts = ([f"GLIBC_{format_dotted(self.glibc)}"] if self.glibc else []) + (
            [format_glibcxx(self.glibcxx)] if self.glibcxx else []
        )
        return ", ".join(parts)


def platform_glibc(platform: str) -> tuple[int, int] | None:
    """The glibc floor a manylinux tag promises: ``manylinux_2_28_x86_64`` -> (2, 28)."""
    return parse_platform(platform).glibc


def needs(wheel: Wheel) -> GlibcNeed:
    """From the bytes' symbol versions, else from a manylinux tag."""
    if wheel.facts is not None:
        binaries = wheel.facts.binaries
        cxx = max((b.glibcxx for b in binaries if b.glibcxx), default=None)
        return GlibcNeed(wheel.facts.glibc, cxx)
    floors = [f for p in wheel.name.platform_tag.split(".") if (f := platform_glibc(p))]
    return GlibcNeed(min(floors) if floors else None, None, "tags")


def check(need: GlibcNeed, machine: Machine) -> Verdict:
    """Judge the floors against the machine's glibc and libstdc++."""
    has = _has(machine)
    if not need.text:
        return Verdict(Demand.GLIBC, True, "no glibc floor", has, "no versioned C library needs")
    glibc: tuple[int, ...] | None = machine.glibc.value
    if need.glibc and glibc is None:
        base = glibc_baseline(machine.cpu.value) if machine.os.value == "linux" else None
        if base is None or need.glibc > base or machine.glibc.reason.startswith("musl"):
            return unknown(Demand.GLIBC, need.text, machine.glibc.reason)
        glibc = base  # every glibc of this CPU has it: a machine whose glibc is not said still does
    if need.glibc and glibc is not None and need.glibc > glibc:
        error = f"version 'GLIBC_{format_dotted(need.glibc)}' not found"
        why = f"needs GLIBC_{format_dotted(need.glibc)}, glibc here is {format_dotted(glibc)}"
        return Verdict(Demand.GLIBC, False, need.text, has, why, error)
    have_cxx = machine.glibcxx.value
    if need.glibcxx and have_cxx is not None and need.glibcxx > have_cxx:
        error = f"libstdc++.so.6: version '{format_glibcxx(need.glibcxx)}' not found"
        why = f"libstdc++ here defines up to {format_glibcxx(have_cxx)}"
        return Verdict(Demand.GLIBC, False, need.text, has, why, error)
    note = "" if not need.glibcxx or have_cxx else f"libstdc++ not checked: {machine.glibcxx.reason}"
    return Verdict(Demand.GLIBC, True, need.text, has, note)


def _has(machine: Machine) -> str:
    parts = []
    if machine.glibc.value:
        parts.append(f"GLIBC_{format_dotted(machine.glibc.value)}")
    if machine.glibcxx.value:
        parts.append(format_glibcxx(machine.glibcxx.value))
    return ", ".join(parts) or "unknown"


def claims(wheel: Wheel) -> list[str]:
    """Where a manylinux tag promises an older glibc than a member needs."""
    if wheel.facts is None:
        return []
    problems = []
    for plat in wheel.name.platform_tag.split("."):
        floor = platform_glibc(plat)
        for b in wheel.facts.binaries:
            if floor and b.glibc and b.glibc > floor:
                problems.append(
                    f"platform {plat} promises glibc {format_dotted(floor)}, "
                    f"but {b.path} needs GLIBC_{format_dotted(b.glibc)}"
                )
    return problems
