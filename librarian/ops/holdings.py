"""Which cells a store's index holds: a cell is one (package version, torch line, CUDA line, CPython,
platform, GPU), and it is held when ``pull`` would find a wheel for a machine of that cell, at a glibc floor
(the same judgement, so a wheel that serves the line by its bytes, or the GPU by compatible SASS, counts).

``plan`` counts with :func:`holdings`; ``build`` holds the wheel it made to the cells it was asked for with
the very same function, so that plan -> build -> plan closes. Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from librarian.catalogue import wheel_of
from librarian.coords import GpuArch, MajorMinor, format_version, package_key
from librarian.demands import bound_to_its_torch_line
from librarian.errors import BadInput
from librarian.index import Index, IndexEntry
from librarian.machine import Machine, Probed, TorchInfo, one_gpu
from librarian.ops.resolve import Resolution, Wants, resolve
from librarian.platforms import linux_platforms
from librarian.pytorch.matrix import Combo, Platform


@dataclass(frozen=True, slots=True)
class Spec:
    """``flash-attn==2.8.3``: a package and the one version to build."""

    package: str  # the index's key (pip's normalized name)
    version: Version
    text: str  # as the user wrote it, for jobs to pass to pip

    @classmethod
    def parse(cls, text: str) -> Spec:
        """``name==version``; anything else is BadInput naming the spec."""
        name, sep, version = text.strip().partition("==")
        if not sep or not name.strip() or not version.strip():
            raise BadInput(f"{text}: a build spec is NAME==VERSION (e.g. flash-attn==2.8.3)")
        try:
            parsed = Version(version.strip())
        except InvalidVersion as e:
            raise BadInput(f"{text}: {version.strip()!r} is not a version") from e
        if parsed.local is not None:
            raise BadInput(f"{text}: name the release without a local label; the label comes from the combo")
        return cls(package_key(name.strip()), parsed, f"{canonicalize_name(name.strip())}=={parsed}")

    @property
    def display(self) -> str:
        return f"{self.package} {self.version}"


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell a plan wants: a package version built for a combo, for one GPU."""

    spec: Spec
    combo: Combo
    sm: GpuArch

    def to_json(self) -> dict[str, Any]:
        c = self.combo
        return {
            "package": self.spec.package,
            "version": str(self.spec.version),
            "torch": format_version(c.torch),
            "cuda": format_version(c.cuda),
            "python": str(c.python),
            "platform": c.platform.value,
            "sm": self.sm.sm,
        }


@dataclass(frozen=True, slots=True)
class Held:
    """A wanted cell the store already holds, and the wheel pull would take for it."""

    cell: Cell
    path: str
    note: str = ""  # why a wheel built for another line or GPU serves it


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A wanted cell the store does not hold though it has that release, and why its nearest wheel misses."""

    cell: Cell
    why: str  # pull's words: "kern-1.0+...whl (sm80): glibc: needs GLIBC_2.32, glibc here is 2.28"


@functools.lru_cache(maxsize=256)
def _tags(python: str, platform: Platform, glibc: MajorMinor) -> tuple[Tag, ...]:
    """The tags a CPython (``cp312``, ``cp314t``) accepts on a platform, as pip orders them."""
    major, minor, free = int(python[2]), int(python[3:].rstrip("t")), python.endswith("t")
    if platform is Platform.WINDOWS_AMD64:
        plats: tuple[str, ...] = ("win_amd64",)
    else:
        plats = linux_platforms(glibc, platform.cpu)
    abis = [python] if free else None  # free-threaded: its own ABI only (no abi3)
    return (
        *cpython_tags((major, minor), abis=abis, platforms=plats),
        *compatible_tags((major, minor), f"cp{major}{minor}", plats),
    )


def cell_wants(cell: Cell, glibc: MajorMinor) -> Wants:
    """The machine of a cell, as pull would be told it by flags."""
    c = cell.combo
    tags = _tags(str(c.python), c.platform, glibc)
    linux = c.platform is not Platform.WINDOWS_AMD64
    machine = Machine(
        gpus=one_gpu(cell.sm.capability, "plan"),
        torch=Probed.found(TorchInfo(f"{format_version(c.torch)}.0", c.cuda), "plan"),
        cuda=Probed.found(c.cuda, "plan"),
        python_tags=Probed.found(tags, "plan"),
        python=Probed.found((c.python.major, c.python.minor), "plan"),
        glibc=Probed.found(glibc, "plan") if linux else Probed.unknown("no glibc on Windows"),
        cpu=Probed.found(c.platform.cpu, "plan"),
        os=Probed.found("linux" if linux else "win32", "plan"),
    )
    return Wants.of(machine)


def _bound(entry: IndexEntry) -> bool:
    """Whether the entry's bytes bind it to exactly its own torch line (then no other line can take it)."""
    wheel = wheel_of(entry)
    return bound_to_its_torch_line(wheel)


def holdings(
    index: Index, cells: Sequence[Cell], glibc: MajorMinor
) -> tuple[list[Held], list[Cell], list[NearMiss]]:
    """Pure: which cells the index holds (pull's resolution, exact mode), which it does not, and why the
    nearest stored wheel of the release misses each it does not. ``build`` asks the same of its wheel."""
    # Per entry, once: its tags and whether its bytes bind it to its own torch line.
    by_spec: dict[Spec, list[tuple[IndexEntry, frozenset[Tag], bool]]] = {}
    for spec in {c.spec for c in cells}:
        by_spec[spec] = [
            (e, e.name.tags, _bound(e))
            for e in index.for_package(spec.package)
            if Version(e.name.version.public) == spec.version
        ]
    held: list[Held] = []
    missing: list[Cell] = []
    near: list[NearMiss] = []
    for cell in cells:
        accepted = accepted_tags(str(cell.combo.python), cell.combo.platform, glibc)
        # Judge only wheels pull could take: tags this interpreter accepts, and not bound by their bytes to
        # another torch line (the two cheap tests; the judgement decides the rest).
        candidates = [
            e
            for e, tags, bound in by_spec[cell.spec]
            if not accepted.isdisjoint(tags) and (not bound or e.cell.label.torch == cell.combo.torch)
        ]
        found = resolve(candidates, cell.spec.package, cell_wants(cell, glibc)) if candidates else None
        pick = found.pick if found is not None else None
        if pick is None:
            missing.append(cell)
            if by_spec[cell.spec]:
                near.append(NearMiss(cell, _why_not(found, by_spec[cell.spec], cell)))
            continue
        same = pick.cell.label == cell.combo.label and pick.cell.sm == cell.sm
        note = "" if same else f"built for {pick.cell.label}, filed under sm{pick.cell.sm.sm}"
        held.append(Held(cell, pick.path, note))
    return held, missing, near


def _why_not(
    found: Resolution | None, stored: Sequence[tuple[IndexEntry, frozenset[Tag], bool]], cell: Cell
) -> str:
    """The nearest miss in pull's words; where no stored wheel of the release was even judged, why."""
    if found is not None and found.near:
        return str(found.near[0])
    c = cell.combo
    names = ", ".join(sorted({e.filename for e, _, _ in stored}))[:200]
    return f"{names}: tags for no {c.python} {c.platform.value} interpreter, or bound to another torch line"


@functools.lru_cache(maxsize=256)
def accepted_tags(python: str, platform: Platform, glibc: MajorMinor) -> frozenset[Tag]:
    return frozenset(_tags(python, platform, glibc))
