"""inspect: the seven demands of each wheel (or bare ``.so``), read from its bytes, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from librarian.coords import WheelName, format_cuda, format_dotted, format_version
from librarian.errors import BadInput
from librarian.facts import BinaryFacts, WheelFacts, facts_to_json
from librarian.inspection import claim_mismatches, inspect_path
from librarian.wheelfile import check_archive


@dataclass(frozen=True, slots=True)
class Inspection:
    """One inspected file: its name (when it is a wheel), facts, and where the name and bytes disagree."""

    path: Path
    name: WheelName | None
    facts: WheelFacts
    mismatches: tuple[str, ...]


def inspect_file(path: Path) -> Inspection:
    """Read one wheel or native binary."""
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    if path.suffix == ".whl":
        check_archive(path)  # a crafted zip is refused in one line before zipfile-based readers see it
    facts = inspect_path(path)
    name = WheelName.parse(path.name) if path.suffix == ".whl" else None
    mismatches = tuple(claim_mismatches(name, facts)) if name else ()
    return Inspection(path, name, facts, mismatches)


def _archs(values: tuple[Any, ...]) -> str:
    return " ".join(str(a) for a in values) or "-"


_OS_NAMES = {"elf": "linux (elf)", "pe": "windows (pe)", "macho": "macos (macho)"}


def demands(item: Inspection) -> list[tuple[str, str]]:
    """Pure: (demand, what the wheel needs) rows, in the order DESIGN.md lists the seven demands."""
    f, name = item.facts, item.name
    members = f.device_binaries
    if members:
        gpu = f"SASS {_archs(f.sass)}; PTX {_archs(f.ptx)}"
        if len(members) > 1:
            gpu += f" (common to all {len(members)} device-code binaries)"
        lto = sorted({str(a) for b in members for a in b.lto})
        if lto:
            gpu += f"; LTO-IR {' '.join(lto)} (opaque, for the device linker)"
    else:
        gpu = "no GPU code"
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
    cpu = " ".join(f.cpus) or "-"
    if name:
        cpu += f" (tag {name.platform_tag})"
    formats = sorted({_OS_NAMES.get(b.format.value, b.format.value) for b in f.binaries})
    glibcxx = max((b.glibcxx for b in f.binaries if b.glibcxx), default=None)
    glibc = f"GLIBC_{format_dotted(f.glibc)}" if f.glibc else "-"
    if glibcxx:
        glibc += f", GLIBCXX_{'.'.join(map(str, glibcxx))}"
    return [
        ("GPU arch", gpu),
        ("torch", torch),
        ("CUDA", "; ".join(cuda_parts) or "-"),
        ("Python", python),
        ("CPU", cpu),
        ("OS", ", ".join(formats) or "no native code"),
        ("glibc", glibc),
    ]


def _member_rows(b: BinaryFacts) -> list[str]:
    rows = [f"  {b.path}: {b.format.value} {b.cpu or '?'}"]
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
    return {
        "file": str(item.path),
        "demands": dict(demands(item)),
        "mismatches": list(item.mismatches),
        "facts": facts_to_json(item.facts),
    }
