"""The GPUs that exist: compute capabilities with the CPU platforms they ship beside. Data, checked on load.

A cell is a real GPU: publish files a wheel under each one here that its SASS serves, and ``--sm`` takes
only these. The list is ``librarian/data/gpus.toml``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from librarian.compat import tomllib
from librarian.coords import ArchKind, GpuArch, MajorMinor, format_version, parse_cuda
from librarian.errors import BadInput
from librarian.platforms import canonical_cpu


@dataclass(frozen=True, slots=True)
class KnownGpu:
    """One compute capability that real products have, e.g. 8.9 (RTX 4090, L4), and where it ships."""

    capability: MajorMinor
    examples: str
    cpus: frozenset[str]
    cuda_first: MajorMinor = (0, 0)  # the first CUDA toolkit that can target it
    cuda_last: MajorMinor | None = None  # the last one; None: current toolkits still can
    driver_last: MajorMinor | None = None  # the newest CUDA any of its drivers runs; None: current ones do

    def cpu_problem(self, cpus: frozenset[str]) -> str | None:
        """``come only with aarch64 CPUs`` where no machine has this GPU beside any of ``cpus`` (none: any)."""
        if self.ships_with(cpus):
            return None
        return f"come only with {' or '.join(sorted(self.cpus))} CPUs"

    def driver_problem(self, cuda: MajorMinor) -> str | None:
        """``have no driver past CUDA 10.2`` where no driver for this GPU runs CUDA ``cuda`` code."""
        if self.runs_cuda(cuda) or self.driver_last is None:
            return None
        return f"have no driver past CUDA {format_version(self.driver_last)}"

    def runs_cuda(self, cuda: MajorMinor) -> bool:
        """Whether a driver for this GPU exists that runs CUDA ``cuda`` code (its runtime's major)."""
        return self.driver_last is None or cuda[0] <= self.driver_last[0]

    @property
    def arch(self) -> GpuArch:
        """Its native SASS arch: ``sm_89``."""
        return GpuArch(*self.capability)

    def ships_with(self, cpus: frozenset[str]) -> bool:
        """Whether a wheel for these CPUs (none: any) can meet this GPU."""
        return not cpus or bool(cpus & self.cpus)

    def compiled_by(self, cuda: MajorMinor) -> bool:
        """Whether the nvcc of CUDA ``cuda`` can target this GPU (its SASS or PTX)."""
        return self.cuda_first <= cuda and (self.cuda_last is None or cuda <= self.cuda_last)

    def toolkits(self) -> str:
        """The CUDA toolkits that can target it: ``CUDA 12.8 or newer``, ``CUDA 6.0 to 12.9``."""
        first = format_version(self.cuda_first)
        if self.cuda_last is None:
            return f"CUDA {first} or newer"
        return f"CUDA {first} to {format_version(self.cuda_last)}"


def parse_gpus(text: str, source: str) -> tuple[KnownGpu, ...]:
    """The GPU list from TOML text; every problem names ``source``."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
        rows = data["gpu"]
        gpus = []
        for row in rows:
            m = re.fullmatch(r"(\d+)\.(\d)", str(row["sm"]))
            if m is None:
                raise ValueError(f"sm {row['sm']!r} is not X.Y")
            cpus = frozenset(canonical_cpu(str(c)) for c in row["cpus"])
            first = parse_cuda(str(row["cuda_first"]))
            last = parse_cuda(str(row["cuda_last"])) if "cuda_last" in row else None
            if last is not None and last < first:
                raise ValueError(
                    f"sm {row['sm']}: cuda_last {row['cuda_last']} is before cuda_first {row['cuda_first']}"
                )
            driver = parse_cuda(str(row["driver_last"])) if "driver_last" in row else None
            gpus.append(
                KnownGpu((int(m[1]), int(m[2])), str(row.get("examples", "")), cpus, first, last, driver)
            )
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise BadInput(f"{source}: not a GPU list ({e})") from e
    return tuple(sorted(gpus, key=lambda g: g.capability))


@functools.cache
def known_gpus() -> tuple[KnownGpu, ...]:
    """The packaged GPU list, read once."""
    text = resources.files("librarian").joinpath("data/gpus.toml").read_text(encoding="utf-8")
    return parse_gpus(text, "librarian/data/gpus.toml")


def find_gpu(capability: MajorMinor) -> KnownGpu | None:
    """The real GPU of this capability, if one exists."""
    return next((g for g in known_gpus() if g.capability == capability), None)


def compiled_by(cuda: MajorMinor, cpus: frozenset[str] = frozenset()) -> tuple[KnownGpu, ...]:
    """The real GPUs (shipping beside ``cpus``; none: any) that CUDA ``cuda``'s nvcc can target, oldest first."""
    return tuple(g for g in known_gpus() if g.compiled_by(cuda) and g.ships_with(cpus))


def parse_real_sm(text: str, flag: str = "--sm") -> GpuArch:
    """A ``--sm`` value that names a GPU that exists: ``89``, ``sm_89``, ``8.9``; not ``86a`` or ``88``."""
    arch = GpuArch.parse(text)
    real = ", ".join(g.arch.sm for g in known_gpus())
    if arch.suffix and (arch.major < 9 or find_gpu(arch.capability) is None):
        plain = GpuArch(arch.major, arch.minor).sm
        raise BadInput(
            f"{flag} {text}: there is no sm_{arch.sm} (arch- and family-specific code exists from sm_90a on); "
            f"name the GPU: {plain}"
        )
    if arch.kind is not ArchKind.SASS or arch.suffix:
        plain = GpuArch(arch.major, arch.minor).sm
        raise BadInput(
            f"{flag} {text}: name the GPU, not a kind of code (sm_{arch.sm} code is filed under {plain})"
        )
    if find_gpu(arch.capability) is None:
        raise BadInput(
            f"{flag} {text}: no GPU of compute capability {arch.major}.{arch.minor} exists (real ones: {real})"
        )
    return arch
