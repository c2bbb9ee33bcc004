"""A made-up eighth demand, as a new demand is added: this one module and one row of the table of demands.

NCCL, NVIDIA's collective-communication library, ships for Linux only: a member that links it
(``libnccl.so.2``, or a Windows ``nccl.dll`` no one ships) loads on no other OS. ``tests/test_new_demand.py``
adds :data:`ROW` to ``librarian.demands.table.DEMANDS`` and watches it reach every command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from librarian.demands import Demand, Row, Sees, Verdict, Wheel
from librarian.demands.table import Claimed
from librarian.machine import Machine
from librarian.platforms import parse_platform

NCCL = Demand("nccl", "NCCL")
_LIBRARY = re.compile(r"(lib)?nccl(\.so\.\d+|\.dll)?$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NcclNeed:
    """The native members that link NCCL, and the library each names."""

    members: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        return "links " + ", ".join(sorted({lib for _, lib in self.members})) if self.members else "no NCCL"


def needs(wheel: Wheel) -> NcclNeed:
    if wheel.facts is None:
        return NcclNeed(())
    found = [(b.path, lib) for b in wheel.facts.binaries for lib in b.needed if _LIBRARY.match(lib)]
    return NcclNeed(tuple(found))


def check(need: NcclNeed, machine: Machine) -> Verdict:
    os = machine.os.value
    if not need.members:
        return Verdict(NCCL, True, need.text, os or "unknown", "links no NCCL")
    if os is None:
        return Verdict(NCCL, None, need.text, "unknown", machine.os.reason)
    if os != "linux":
        error = f"{need.members[0][1]}: cannot open shared object file: No such file or directory"
        return Verdict(NCCL, False, need.text, os, "NCCL is Linux-only", error)
    return Verdict(NCCL, True, need.text, os)


def claims(wheel: Wheel) -> list[str]:
    found = needs(wheel).members
    return [
        f"platform {plat}, but {path} links {lib} (NCCL is Linux-only)"
        for plat in wheel.name.platform_tag.split(".")
        if (os := parse_platform(plat).os) is not None and os != "linux"
        for path, lib in found
    ]


ROW = Row(NCCL, Sees.LOADED, needs, check, claims, Claimed.PLATFORM, "--allow-platform-mismatch")
