"""What every demand module shares: the demand names, the wheel they read, the verdict they return.

Each of ``gpu``, ``torch``, ``cuda``, ``python``, ``cpu``, ``os`` and ``glibc`` has the same small shape:
``needs(wheel) -> Need`` (from the bytes' facts where they were read, else from the filename's tags and
label) and ``check(need, machine) -> Verdict``; ``claims(wheel)`` says where the filename contradicts
the bytes. Pure: no files, no processes, no environment.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from packaging.specifiers import SpecifierSet

from librarian.coords import GpuArch, Label, LabelClaim, WheelName
from librarian.facts import WheelFacts


@dataclass(frozen=True, slots=True)
class Demand:
    """One thing a wheel demands of a machine: its key (``gpu``, as JSON says it) and its title (``GPU arch``,
    as people read it). The seven are below; the table of :mod:`librarian.demands.table` says how each is
    read and judged, and a new demand is one more value and one more row."""

    value: str
    title: str

    GPU: ClassVar[Demand]
    TORCH: ClassVar[Demand]
    CUDA: ClassVar[Demand]
    PYTHON: ClassVar[Demand]
    CPU: ClassVar[Demand]
    OS: ClassVar[Demand]
    GLIBC: ClassVar[Demand]

    def __str__(self) -> str:
        return self.title


Demand.GPU = Demand("gpu", "GPU arch")
Demand.TORCH = Demand("torch", "torch")
Demand.CUDA = Demand("cuda", "CUDA")
Demand.PYTHON = Demand("python", "Python")
Demand.CPU = Demand("cpu", "CPU arch")
Demand.OS = Demand("os", "OS")
Demand.GLIBC = Demand("glibc", "glibc")


@dataclass(frozen=True, slots=True)
class Said:
    """What a wheel's own METADATA and WHEEL files say of it: ``Name``, ``Version`` and the ``Tag`` lines."""

    name: str
    version: str
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Wheel:
    """What the demands are read from: the filename always; the bytes' facts, METADATA and cell when known.

    ``filed_for`` is the GPU of the store cell a wheel sits in: the GPU demand's fallback for an index
    entry that carries no facts. ``said`` is what its METADATA and WHEEL claim, where they were read.
    ``filed_as`` is the torch and CUDA line of that cell: an unlabelled wheel's claim, as its path makes it.
    """

    name: WheelName
    facts: WheelFacts | None = None
    requires_python: SpecifierSet | None = None
    filed_for: GpuArch | None = None
    said: Said | None = None
    requires_torch: SpecifierSet | None = None  # METADATA's Requires-Dist on torch: a claim, and a demand
    filed_as: Label | None = None

    @property
    def label_claim(self) -> LabelClaim | None:
        """What the wheel claims of its torch and CUDA line: its filename's label, in whatever form; where the
        filename carries none, the cell's path (a hand-made wheelhouse's convention: the path is the claim)."""
        own = self.name.label_claim
        if own is not None or self.filed_as is None:
            return own
        return LabelClaim.of_path(self.filed_as)


class Cause(enum.Enum):
    """Why a demand failed, for the commands to act on (``reason`` is the words for people, and may change)."""

    NONE = "none"
    OTHER_PYTHON = "other_python"  # built for another Python or ABI
    OTHER_PLATFORM = "other_platform"  # no platform tag the machine accepts
    REQUIRES_PYTHON = "requires_python"  # METADATA's Requires-Python excludes the interpreter
    DRIVER_TOO_OLD = "driver_too_old"  # the driver cannot run the CUDA runtime the process loads
    BELOW_STABLE_FLOOR = "below_stable_floor"  # a stable-ABI build on a torch line older than its floor
    TORCH_REQUIREMENT = "torch_requirement"  # its own Requires-Dist on torch excludes the installed torch


# Why a member does not load: the machine's CUDA line picks another of its alternatives.
OTHER_CUDA_LINE = "another CUDA line's build"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One demand judged: ``ok`` is True (runs), False (will not run) or None (the machine part is unknown).

    ``partly`` names the members that load but have no code for this GPU (the wheel runs, but calls into
    them fail); ``not_loaded`` the CUDA-line alternatives this machine does not load.
    """

    demand: Demand
    ok: bool | None
    wheel_needs: str
    machine_has: str
    reason: str = ""
    predicted_error: str = ""  # what the user would meet at run time, for failures
    partly: tuple[str, ...] = ()
    not_loaded: tuple[str, ...] = ()
    exact: bool = True  # met exactly (own SASS, same CUDA line), not only by a compatibility rule
    cause: Cause = Cause.NONE  # why it failed, as a value (the commands switch on it, never on the words)

    @property
    def failed(self) -> bool:
        """Whether this demand rules the wheel out."""
        return self.ok is False

    def __str__(self) -> str:
        return f"{self.demand.title}: wheel needs {self.wheel_needs}, machine has {self.machine_has}"


def unknown(demand: Demand, needs: str, reason: str) -> Verdict:
    """A verdict that cannot be given: the machine part is unknown; ``reason`` names the flag."""
    return Verdict(demand, None, needs, "unknown", reason)


def some(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c``; past ``shown`` names, ``a, b, c and 15,967 others``: a line a person reads stays a line
    (flashinfer-cubin has 16,000 members). The full lists stay in the verdict's fields and in ``--json``."""
    if len(names) <= shown + 1:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown:,} others"
