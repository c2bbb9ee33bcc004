"""The CUDA demand: the wheel's CUDA line (label, libcudart, toolkit) against torch's, and the driver.

The CUDA runtime a process loads is torch's; an extension built for another major cannot find its
``libcudart.so.N``, one built against a newer minor misses symbols, and a driver older than the runtime's
major refuses it (minor-version compatibility covers the rest). CUDA-line alternatives (bitsandbytes'
``_cuda118`` ... ``_cuda132``) count only for the member the line loads.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

from librarian.coords import MajorMinor, format_version
from librarian.cuda_libraries import cuda_majors_of
from librarian.demands.base import Cause, Demand, Verdict, Wheel, unknown
from librarian.demands.members import NO_DEVICE_CODE, DeviceCode, device_code, loading
from librarian.demands.torch import pinned_cuda
from librarian.facts import BinaryFormat, WheelFacts, library_name
from librarian.machine import Machine

DRIVER_TOO_OLD = "CUDA driver version is insufficient for CUDA runtime version"
NO_SUCH_LIBRARY = "cannot open shared object file: No such file or directory"
NO_SUCH_MODULE = "The specified module could not be found."  # Windows' words for a DLL it cannot find


@dataclass(frozen=True, slots=True)
class CudaNeed:
    """What ties a wheel to a CUDA line: the label's claim, libcudart majors, the building toolkit."""

    label: tuple[int, int | None] | None  # (major, minor); flash-attn's labels say the major only
    code: DeviceCode = NO_DEVICE_CODE
    host_cudarts: tuple[int, ...] = ()  # libcudart majors linked by members without device code
    toolkit: MajorMinor | None = None
    links_torch: bool = False
    # The CUDA runtime by major as the wheel names it (``cudart64_12.dll``, ``libcudart.so.12``), and the
    # extension module a missing one would stop (Windows says which module its loader failed for).
    runtimes: tuple[tuple[int, str], ...] = ()
    windows: bool = False
    module: str = ""
    # The other CUDA toolkit libraries it links (libnvrtc.so.12, cublas64_13.dll) and the CUDA majors that
    # ship each: they bind it as libcudart does.
    libraries: tuple[tuple[str, frozenset[int]], ...] = ()
    said_by: str = "label"  # who says ``label``: the label, the path, or ``its torch pin`` (Requires-Dist)

    def other_major_library(self, major: int) -> tuple[str, frozenset[int]] | None:
        """The first toolkit library it links that no CUDA ``major`` toolkit ships, if any."""
        return next(((lib, ms) for lib, ms in self.libraries if major not in ms), None)

    def runtime_name(self, major: int) -> str:
        """The runtime library of ``major`` as this wheel names it (Linux's name where it names none)."""
        named = dict(self.runtimes)
        if major in named:
            return named[major]
        return f"cudart64_{major}.dll" if self.windows else f"libcudart.so.{major}"

    def cannot_load(self, library: str) -> str:
        """The error the user's import meets when ``library`` is not there, in the OS's own words."""
        if self.windows:
            return f"ImportError: DLL load failed while importing {self.module or 'the extension'}: {NO_SUCH_MODULE} ({library})"
        return f"{library}: {NO_SUCH_LIBRARY}"

    @property
    def label_line(self) -> MajorMinor | None:
        """The label's full CUDA line, when it gives the minor."""
        return (self.label[0], self.label[1]) if self.label and self.label[1] is not None else None


def needs(wheel: Wheel) -> CudaNeed:
    """From the label, and from the facts where the bytes were read."""
    claim = wheel.label_claim
    label = (claim.cuda_major, claim.cuda_minor) if claim else pinned_cuda(wheel.requires_torch)
    facts = wheel.facts
    said_by = claim.said_by if claim else "its torch pin"
    if facts is None:
        return CudaNeed(label, links_torch=claim is not None and claim.torch is not None, said_by=said_by)
    return replace(_from_facts(label, facts), said_by=said_by)


def _from_facts(label: tuple[int, int | None] | None, facts: WheelFacts) -> CudaNeed:
    host = tuple(sorted({b.cudart_major for b in facts.binaries if b.cudart_major and not b.has_kernels}))
    code = device_code(facts)
    toolkit = facts.toolkit
    links = any(b.links_torch or b.torch_symbols for b in facts.binaries)
    runtimes: dict[int, str] = {}
    for b in facts.binaries:
        if b.cudart_major is not None and b.cudart_library is not None:
            runtimes.setdefault(b.cudart_major, library_name(b.cudart_library, keep_case=True))
    windows = any(b.format is BinaryFormat.PE for b in facts.binaries)
    # The extension module: one that defines PyInit_ (read on ELF), else a .pyd (Windows' own name for one).
    modules = [b for b in facts.binaries if b.extension] or [
        b for b in facts.binaries if b.path.endswith(".pyd")
    ]
    module = posixpath.basename(modules[0].path).split(".")[0] if modules else ""
    alternatives = {m.path for c in code.choices for m in c.members}  # one per CUDA line: the choice decides
    libraries: dict[str, frozenset[int]] = {}
    for b in facts.binaries:
        for lib in b.needed if b.path not in alternatives else ():
            if (majors := cuda_majors_of(lib)) is not None:
                libraries.setdefault(library_name(lib, keep_case=True), majors)
    return CudaNeed(label, code, host, toolkit, links, tuple(sorted(runtimes.items())), windows, module,
                    tuple(sorted(libraries.items())))  # fmt: skip


def _text(need: CudaNeed, cudarts: list[int]) -> str:
    """The one description: the label's line, the toolkit that built its device code, the runtimes it links
    (or that it links none: nvcc's default static cudart)."""
    label = need.label
    said = (
        [f"CUDA {label[0]}" + (f".{label[1]}" if label[1] is not None else "") + f" ({need.said_by})"]
        if label
        else []
    )
    if need.toolkit and not need.code.empty:
        said.append(f"built by CUDA {format_version(need.toolkit)}")
    runtimes = [need.runtime_name(m) for m in cudarts]
    if need.toolkit and not need.code.empty and not runtimes:
        runtimes = ["links no CUDA runtime (static)"]
    return ", ".join(said + runtimes + [lib for lib, _ in need.libraries]) or "CUDA (line unknown)"


def check(need: CudaNeed, machine: Machine) -> Verdict:
    """Judge the CUDA demand against torch's CUDA line and the driver."""
    torch_cuda, driver = machine.cuda.value, machine.driver_cuda.value
    load = loading(need.code, torch_cuda or need.label_line)
    loaded_cudarts = {m.cudart for m in load.may_load if m.cudart}
    cudarts = sorted(loaded_cudarts | set(need.host_cudarts))
    if need.label is None and not cudarts and need.code.empty and not need.libraries:
        has = f"torch CUDA {format_version(torch_cuda)}" if torch_cuda else "no CUDA torch"
        return Verdict(Demand.CUDA, True, "no CUDA", has, "the wheel uses no CUDA runtime")
    text = _text(need, cudarts)
    if load.missing:
        has = f"torch CUDA {format_version(torch_cuda)}" if torch_cuda else "CUDA (from the label)"
        error = NO_SUCH_MODULE if need.windows else NO_SUCH_LIBRARY
        return Verdict(Demand.CUDA, False, text, has, load.missing_text(torch_cuda or need.label_line), error)
    if torch_cuda is not None and (
        any(m != torch_cuda[0] for m in cudarts) or need.other_major_library(torch_cuda[0])
    ):
        # A runtime of another major than torch's is what rules it out, whatever the driver: no driver
        # makes the process load torch's runtime and the wheel's at once.
        return _against_torch(need, text, cudarts, torch_cuda)
    if (too_old := _driver_too_old(need, machine, text, cudarts)) is not None:
        return too_old
    if torch_cuda is None:
        if not need.links_torch:
            # Not a torch extension (a label's CUDA line says what it was built with, not a torch it needs):
            # only the driver has to run the runtime it loads.
            if driver is None:
                return unknown(Demand.CUDA, text, machine.driver_cuda.reason)
            why = "does not link torch; the driver runs its CUDA runtime"
            return Verdict(Demand.CUDA, True, text, f"driver CUDA {format_version(driver)}", why)
        return unknown(Demand.CUDA, text, machine.cuda.reason)
    has = f"torch CUDA {format_version(torch_cuda)}"
    same = need.label_line is None or need.label_line == torch_cuda  # built for this very line
    in_choices = {m.path for c in need.code.choices for m in c.members}
    picked = [m for m in load.loaded if m.path in in_choices]
    if picked:  # it carries a build per CUDA line: the one this line loads decides, not the label
        line = picked[0].cuda_token or (picked[0].cudart or torch_cuda[0], 0)
        why = f"carries a CUDA {format_version(line)} build ({picked[0].name})"
        return Verdict(Demand.CUDA, True, text, has, why, exact=same)
    if not cudarts and not need.links_torch and not need.libraries:
        # No CUDA runtime of its own and no torch: its device code and the driver bind it, no CUDA line does.
        why = "links no CUDA runtime and no torch: only the driver runs its code"
        return Verdict(Demand.CUDA, True, text, has, why, exact=same)
    return _against_torch(need, text, cudarts, torch_cuda)


def _driver_too_old(need: CudaNeed, machine: Machine, text: str, cudarts: list[int]) -> Verdict | None:
    """The verdict where the driver is older than the newest runtime the process loads (torch's, the
    label's, a linked libcudart, or, statically linked, the toolkit that built its device code); else None."""
    torch_cuda, driver = machine.cuda.value, machine.driver_cuda.value
    linked = [(m, 0) for m in cudarts] or ([need.toolkit] if need.toolkit and not need.code.empty else [])
    linked += [(min(majors), 0) for _, majors in need.libraries]  # each needs a driver of its CUDA at least
    label_rt = (need.label[0], need.label[1] or 0) if need.label else None
    runtime = max([r for r in (torch_cuda, label_rt) if r] + linked, default=None)
    if driver is None or runtime is None or driver[0] >= runtime[0]:
        return None
    why = f"the driver is for CUDA {format_version(driver)}, the runtime is {format_version(runtime)}"
    if machine.driver_cuda.source.startswith("--preset"):  # a preset's guess, not this machine's driver
        why += f" ({machine.driver_cuda.source}'s driver; --driver {runtime[0]}.0 overrides it)"
    has = f"driver CUDA {format_version(driver)}"
    return Verdict(Demand.CUDA, False, text, has, why, DRIVER_TOO_OLD, cause=Cause.DRIVER_TOO_OLD)


def _against_torch(need: CudaNeed, text: str, cudarts: list[int], torch_cuda: MajorMinor) -> Verdict:
    """One runtime major serves that major's lines from the minor it was built against up (the label's)."""
    has = f"torch CUDA {format_version(torch_cuda)}"
    for major in cudarts:
        if major != torch_cuda[0]:
            return Verdict(
                Demand.CUDA,
                False,
                text,
                has,
                f"links {need.runtime_name(major)}, torch ships the CUDA {torch_cuda[0]} runtime",
                need.cannot_load(need.runtime_name(major)),
            )
    if other := need.other_major_library(torch_cuda[0]):
        lib, majors = other
        return Verdict(
            Demand.CUDA,
            False,
            text,
            has,
            f"links {lib}, which only CUDA {_majors(majors)} ships; torch's CUDA is {torch_cuda[0]}",
            need.cannot_load(lib),
        )
    label = need.label
    if label is not None and label[0] != torch_cuda[0]:
        why = f"built for CUDA {label[0]}, torch is built for CUDA {torch_cuda[0]}"
        return Verdict(Demand.CUDA, False, text, has, why, need.cannot_load(need.runtime_name(label[0])))
    if label is not None and label[1] is not None and label[1] > torch_cuda[1]:
        why = f"built against a newer CUDA runtime than torch's {format_version(torch_cuda)}"
        return Verdict(Demand.CUDA, False, text, has, why, "undefined symbol: cuda... (from libcudart)")
    if label is not None and label[1] is not None and label[1] < torch_cuda[1]:
        return Verdict(
            Demand.CUDA, True, text, has, "older CUDA minor: runs by minor-version compatibility", exact=False
        )
    return Verdict(Demand.CUDA, True, text, has)


def claims(wheel: Wheel) -> list[str]:
    """Where the label's CUDA line contradicts the bytes (toolkit major, libcudart of the members it loads)."""
    claim = wheel.label_claim
    if claim is None or wheel.facts is None:
        return []
    need = _from_facts((claim.cuda_major, claim.cuda_minor), wheel.facts)
    problems = []
    # Only the major must agree: an extension built by nvcc 12.9 against torch cu128 is common and fine.
    if need.toolkit is not None and need.toolkit[0] != claim.cuda_major:
        problems.append(
            f"{claim.said_by} says CUDA {claim.cuda_text}, device code built by CUDA {format_version(need.toolkit)}"
        )
    load = loading(need.code, need.label_line or (claim.cuda_major, 0))
    linking = [(m.path, m.cudart) for m in load.loaded if m.cudart]
    linking += [
        (b.path, b.cudart_major) for b in wheel.facts.binaries if b.cudart_major and not b.has_kernels
    ]
    by_major: dict[int, list[str]] = {}
    for path, major in linking:
        if major != claim.cuda_major:
            by_major.setdefault(major, []).append(path)
    for major, paths in sorted(by_major.items()):  # each runtime once, its members folded (a 500 MB wheel's)
        members = paths[0] + (f" (and {len(paths) - 1} more members)" if len(paths) > 1 else "")
        problems.append(f"{claim.said_by} says CUDA {claim.cuda_text}, {members} links libcudart.so.{major}")
    if other := need.other_major_library(claim.cuda_major):
        lib, majors = other
        user = next((b.path for b in wheel.facts.binaries if lib in b.needed), lib)
        problems.append(
            f"{claim.said_by} says CUDA {claim.cuda_text}, {user} links {lib}, which only CUDA {_majors(majors)} ships"
        )
    return problems


def _majors(majors: frozenset[int]) -> str:
    return " and ".join(str(m) for m in sorted(majors))
