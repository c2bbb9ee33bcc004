"""inspect: the seven demands of each wheel (or bare ``.so``), read from its bytes, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from librarian.coords import WheelName, format_cuda, format_dotted, format_version
from librarian.demands import Wheel, claims, cpu, gpu
from librarian.demands.members import device_code, loading
from librarian.errors import BadInput
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts, facts_to_json
from librarian.wheel.binaries import inspect_path, inspect_wheel
from librarian.wheel.wheelfile import check_archive


@dataclass(frozen=True, slots=True)
class Inspection:
    """One inspected file: its name (when it is a wheel), facts, and where the name and bytes disagree."""

    path: Path
    name: WheelName | None
    facts: WheelFacts
    mismatches: tuple[str, ...]


def inspect_file(path: Path, *, jobs: int | None = None) -> Inspection:
    """Read one wheel or native binary (its members by ``jobs`` threads; default: the cores available)."""
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    if path.suffix == ".whl":
        # A crafted zip is refused in one line before zipfile-based readers see it; its directory is read once.
        facts = inspect_wheel(path, jobs=jobs, directory=check_archive(path))
    else:
        facts = inspect_path(path, jobs=jobs)
    name = WheelName.parse(path.name) if path.suffix == ".whl" else None
    mismatches = tuple(claims(Wheel(name, facts))) if name else ()
    return Inspection(path, name, facts, mismatches)


def _archs(values: tuple[Any, ...]) -> str:
    return " ".join(str(a) for a in values) or "-"


_OS_NAMES = {"elf": "linux (elf)", "pe": "windows (pe)", "macho": "macos (macho)"}


def _gpu_need(item: Inspection) -> gpu.GpuNeed:
    """The wheel's GPU code and its label's CUDA line (none for a bare binary)."""
    return gpu.needs(Wheel(item.name, item.facts)) if item.name else gpu.GpuNeed(device_code(item.facts))


def gpu_coverage(item: Inspection) -> tuple[gpu.Coverage, ...]:
    """Pure: the real GPUs the wheel serves natively (its cells), with the members each one lacks."""
    need = _gpu_need(item)
    return gpu.coverage(need, need.label_cuda, cpu.binary_cpus(item.facts))


def _gpu_row(item: Inspection, coverage: tuple[gpu.Coverage, ...] | None) -> str:
    need = _gpu_need(item)
    code = need.code
    if code.empty:
        return "no GPU code"
    parts: list[str] = []
    groups: list[tuple[tuple[str, ...], list[str]]] = []
    for c in gpu_coverage(item) if coverage is None else coverage:  # cells lacking the same members: one group
        if groups and groups[-1][0] == c.lacking:
            groups[-1][1].append(f"sm{c.sm.sm}")
        else:
            groups.append((c.lacking, [f"sm{c.sm.sm}"]))
    if groups:
        shown = [" ".join(sms) + (f" (partly: not {', '.join(lacking)})" if lacking else "") for lacking, sms in groups]
        parts.append("runs natively on " + "; ".join(shown))
    else:
        parts.append("its SASS runs natively on no GPU that exists")
    ptx = sorted({a for m in code.all_members for a in m.ptx})
    if ptx:
        parts.append(f"PTX {_archs(tuple(ptx))} (JIT-compiled on newer GPUs)")
    if code.choices:
        line = need.label_cuda
        load = loading(code, line)
        if line and load.loaded:
            in_choices = {m for c in code.choices for m in c.members}
            chosen = [m.name for m in load.loaded if m in in_choices]
            parts.append(f"CUDA {format_version(line)} loads {', '.join(chosen) or 'none of its CUDA-line builds'}")
        else:
            parts.append("torch's CUDA line picks one of " + "; ".join(c.describe() for c in code.choices))
    lto = sorted({str(a) for b in item.facts.binaries for a in b.lto})
    if lto:
        parts.append(f"LTO-IR {' '.join(lto)} (opaque, for the device linker)")
    return "; ".join(parts)


def demands(item: Inspection, coverage: tuple[gpu.Coverage, ...] | None = None) -> list[tuple[str, str]]:
    """Pure: (demand, what the wheel needs) rows, in the order DESIGN.md lists the seven demands.

    ``coverage``: :func:`gpu_coverage` of ``item``, where the caller has it already."""
    f, name = item.facts, item.name
    label = name.label if name else None
    claim = name.label_claim if name else None
    links = sorted({lib for b in f.binaries for lib in b.needed if lib.startswith(("libc10", "libtorch"))})
    torch = f"torch {format_version(label.torch)} (label)" if label else (str(claim) if claim else "no label")
    if links:
        torch += f"; links {' '.join(links)}"
    cudarts = sorted({f"libcudart.so.{b.cudart_major}" for b in f.binaries if b.cudart_major})
    cuda_parts = [f"cu{format_cuda(label.cuda)} (label)"] if label else []
    if f.toolkit:
        cuda_parts.append(f"built by CUDA {format_version(f.toolkit)}")
    cuda_parts += cudarts
    python = name.tag_text.rsplit("-", 1)[0] if name else "-"
    cpu_text = " ".join(sorted(cpu.binary_cpus(f))) or "-"
    if name:
        cpu_text += f" (tag {name.platform_tag})"
    formats = sorted({_OS_NAMES[b.format.value] for b in f.binaries if b.format.value in _OS_NAMES})
    glibcxx = max((b.glibcxx for b in f.binaries if b.glibcxx), default=None)
    glibc = f"GLIBC_{format_dotted(f.glibc)}" if f.glibc else "-"
    if glibcxx:
        glibc += f", GLIBCXX_{'.'.join(map(str, glibcxx))}"
    return [
        ("GPU arch", _gpu_row(item, coverage)),
        ("torch", torch),
        ("CUDA", "; ".join(cuda_parts) or "-"),
        ("Python", python),
        ("CPU", cpu_text),
        ("OS", ", ".join(formats) or "no native code"),
        ("glibc", glibc),
    ]


def _member_rows(b: BinaryFacts) -> list[str]:
    kind = "device code (loaded by the driver)" if b.format is BinaryFormat.CUDA else f"{b.format.value} {b.cpu or '?'}"
    rows = [f"  {b.path}: {kind}"]
    if b.has_device_code:
        rows.append(f"    SASS {_archs(b.sass)}; PTX {_archs(b.ptx)}")
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
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    for m in item.mismatches:
        lines.append(f"  ! {m}")
    if verbose:
        for b in item.facts.binaries:
            lines += _member_rows(b)
    return "\n".join(lines)


def inspection_json(item: Inspection) -> dict[str, Any]:
    """One file's demands, facts and mismatches as JSON."""
    coverage = gpu_coverage(item)
    return {
        "file": str(item.path),
        "demands": dict(demands(item, coverage)),
        "mismatches": list(item.mismatches),
        "gpus": [{"sm": f"sm{c.sm.sm}", "partly": list(c.lacking)} for c in coverage],
        "facts": facts_to_json(item.facts),
    }
