"""inspect: the seven demands of each wheel (or bare ``.so``), read from its bytes, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from librarian.coords import WheelName, format_dotted, format_version
from librarian.demands import (
    OTHER_CUDA_LINE,
    CellFit,
    Claim,
    ClaimKind,
    Demand,
    Judgement,
    Said,
    Wheel,
    cells,
    claims,
    judge,
    no_cell_words,
    some,
)
from librarian.demangle import readable
from librarian.errors import BadInput, BadWheel
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts, facts_to_json
from librarian.machine import Machine
from librarian.safeio import input_problem
from librarian.wheel import OpenedWheel, inspect_path, said_of


@dataclass(frozen=True, slots=True)
class Inspection:
    """One inspected file: its name (when it is a wheel), facts, the judgement on no machine in particular
    (what loads, what the wheel needs), its cells, and every contradiction between what it says and its bytes."""

    path: Path
    name: WheelName | None
    facts: WheelFacts
    judgement: Judgement
    cells: tuple[CellFit, ...]
    claims: tuple[Claim, ...] = ()

    @property
    def mismatches(self) -> tuple[str, ...]:
        """The contradictions, as lines."""
        return tuple(str(c) for c in self.claims)


# A bare binary has no filename tags: it is judged under a neutral name, and no claim is read from it.
_BARE = WheelName.parse("bare-0-py3-none-any.whl")


def inspect_file(path: Path, *, jobs: int | None = None) -> Inspection:
    """Read one wheel or native binary (its members by ``jobs`` threads; default: the cores available)."""
    if problem := input_problem(path):  # a FIFO would block the read: refused by what it is
        raise BadInput(f"{path}: {problem}")
    if path.suffix != ".whl":
        facts = inspect_path(path, jobs=jobs)
        wheel = Wheel(_BARE, facts)
        return Inspection(path, None, facts, judge(wheel, Machine()), cells(wheel))
    # A crafted zip is refused in one line before zipfile-based readers see it; its directory is read once.
    opened = OpenedWheel.archive(path)
    facts = opened.facts(jobs)
    name = opened.name
    said, unreadable = _said(opened)
    wheel = Wheel(name, facts, said=said)
    found = claims(wheel)
    if unreadable:
        found = (*found, unreadable)
    return Inspection(path, name, facts, judge(wheel, Machine()), cells(wheel), found)


def _said(opened: OpenedWheel) -> tuple[Said | None, Claim | None]:
    """What METADATA and WHEEL say; a wheel whose dist-info cannot be read is still inspected, and says so."""
    try:
        return said_of(opened.info()), None
    except BadWheel as e:
        return None, Claim(ClaimKind.DIST_INFO, str(e).removeprefix(f"{opened.path}: "))


def _archs(values: tuple[Any, ...]) -> str:
    return " ".join(str(a) for a in values) or "-"


def _where_it_runs(item: Inspection) -> str:
    """The GPU row's second half: the cells the judgement found and which CUDA-line build loads (what the
    judgement says beyond the need itself), rendered."""
    if not any(b.has_kernels for b in item.facts.binaries):
        return "" if not any(b.has_device_code for b in item.facts.binaries) else "no kernels: serves no GPU"
    groups: list[tuple[tuple[str, ...], list[str]]] = []
    for c in item.cells:  # cells lacking the same members: one group
        if groups and groups[-1][0] == c.partly:
            groups[-1][1].append(f"sm{c.sm.sm}")
        else:
            groups.append((c.partly, [f"sm{c.sm.sm}"]))
    shown = [
        " ".join(sms) + (f" (partly: not {some(lacking)})" if lacking else "") for lacking, sms in groups
    ]
    parts = ["runs natively on " + "; ".join(shown) if shown else no_cell_words(item.facts.archs)]
    j = item.judgement
    line = item.name.label.cuda if item.name and item.name.label else None
    if j.picked and line:
        parts.append(f"CUDA {format_version(line)} loads {', '.join(p.rsplit('/', 1)[-1] for p in j.picked)}")
    elif j.undecided:
        parts.append("torch's CUDA line picks one of " + "; ".join(j.undecided))
    elif line and any(why == OTHER_CUDA_LINE for _, why in j.skipped):
        parts.append(f"CUDA {format_version(line)} loads none of its CUDA-line builds")
    return "; ".join(parts)


def demands(item: Inspection) -> list[tuple[str, str]]:
    """Pure: (demand, what the wheel needs) rows, one per row of the table of demands, in its order: what
    the judgement's verdicts say the wheel needs (on no machine in particular), the GPU's with where it runs.

    The verdicts count the members that load on an NVIDIA machine; those that never load are listed
    after the table."""
    rows = []
    for v in item.judgement.verdicts:
        text = v.wheel_needs
        if v.demand == Demand.GPU and (where := _where_it_runs(item)):
            text = f"{text}; {where}"
        elif v.demand == Demand.PYTHON and item.name is None:
            text = "-"  # a bare binary has no filename, so no tags: it was judged under a neutral one
        rows.append((v.demand.title, text))
    return rows


def _member_rows(b: BinaryFacts) -> list[str]:
    kind = (
        "device code (loaded by the driver)"
        if b.format is BinaryFormat.CUDA
        else f"{b.format.value} {b.cpu or '?'}"
    )
    rows = [f"  {b.path}: {kind}"]
    if b.has_device_code:
        rows.append(
            f"    SASS {_archs(b.sass)}; PTX {_archs(b.ptx)}"
            + ("; no kernels (a stub)" if b.no_kernels else "")
        )
        if b.relocatable_sass or b.relocatable_ptx:
            rows.append(f"    relocatable SASS {_archs(b.relocatable_sass)}; PTX {_archs(b.relocatable_ptx)}")
        if b.toolkit:
            rows.append(f"    built by CUDA {format_version(b.toolkit)}")
    if b.glibc:
        rows.append(f"    needs GLIBC_{format_dotted(b.glibc)}")
    if b.needed:
        rows.append(f"    needs {' '.join(b.needed)}")
    return rows


def render_inspection(item: Inspection, verbose: bool = False) -> str:
    """A readable table of the seven demands; per member with ``verbose``."""
    lines = [str(item.path)]
    rows = demands(item)
    rows = list(zip((k for k, _ in rows), readable(v for _, v in rows), strict=True))  # C++ names demangled
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    for path, why in item.judgement.skipped:
        lines.append(
            f"  - {path}: never loads on an NVIDIA machine ({why})"
            if why != OTHER_CUDA_LINE
            else f"  - {path}: not loaded ({why})"
        )
    for m in item.mismatches:
        lines.append(f"  ! {m}")
    if verbose:
        for b in item.facts.binaries:
            lines += _member_rows(b)
    return "\n".join(lines)


def inspection_json(item: Inspection) -> dict[str, Any]:
    """One file's demands, facts and mismatches as JSON."""
    return {
        "file": str(item.path),
        "demands": dict(demands(item)),
        "mismatches": list(item.mismatches),
        "claims": [{"kind": c.kind.value, "text": c.text, "flag": c.flag or None} for c in item.claims],
        "gpus": [
            {
                "sm": f"sm{c.sm.sm}",
                "partly": list(c.partly),
                "serving": str(c.serving.arch),
                "how": c.serving.kind,
            }
            for c in item.cells
        ],
        "never_loaded": [{"member": m, "why": why} for m, why in item.judgement.skipped],
        "facts": facts_to_json(item.facts),
    }
