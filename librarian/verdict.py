"""Facts + machine -> one verdict per demand: will this wheel run here, and if not, what error it would raise.

Pure: takes a :class:`~librarian.facts.WheelFacts`, the wheel's name and a :class:`~librarian.machine.Machine`
built by hand or by ``librarian.probe``. One small check per demand; the GPU rules are NVIDIA's, as
written in DESIGN.md (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from packaging.version import Version

from librarian.coords import ArchKind, GpuArch, MajorMinor, WheelName, format_dotted, format_version
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.machine import Machine, format_glibcxx, normalize_cpu

C = TypeVar("C")

NO_KERNEL_IMAGE = "CUDA error: no kernel image is available for execution on the device"
PTX_TOO_NEW = "CUDA error: the provided PTX was compiled with an unsupported toolchain"
DRIVER_TOO_OLD = "CUDA driver version is insufficient for CUDA runtime version"


class Demand(enum.Enum):
    """The seven things a wheel demands of a machine."""

    GPU = "gpu"
    TORCH = "torch"
    CUDA = "cuda"
    PYTHON = "python"
    CPU = "cpu"
    OS = "os"
    GLIBC = "glibc"

    @property
    def title(self) -> str:
        """How a verdict names the demand: ``GPU arch``."""
        return _TITLES[self]


_TITLES = {
    Demand.GPU: "GPU arch",
    Demand.TORCH: "torch",
    Demand.CUDA: "CUDA",
    Demand.PYTHON: "Python tags",
    Demand.CPU: "CPU arch",
    Demand.OS: "OS",
    Demand.GLIBC: "glibc",
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One demand judged: ``ok`` is True (runs), False (will not run) or None (machine part unknown)."""

    demand: Demand
    ok: bool | None
    wheel_needs: str
    machine_has: str
    reason: str = ""
    predicted_error: str = ""  # what the user would meet at run time, for failures

    @property
    def failed(self) -> bool:
        """Whether this demand rules the wheel out."""
        return self.ok is False

    def __str__(self) -> str:
        return f"{self.demand.title}: wheel needs {self.wheel_needs}, machine has {self.machine_has}"


def _unknown(demand: Demand, needs: str, reason: str) -> Verdict:
    return Verdict(demand, None, needs, "unknown", reason)


# --- GPU rules --------------------------------------------------------------------------------------------


def _arch_fits(arch: GpuArch, capability: MajorMinor) -> bool:
    if arch.suffix == "a":  # arch-specific: exactly that GPU
        return arch.capability == capability
    # Plain and family-specific ("f") code: same major, GPU minor at least the code's.
    return arch.major == capability[0] and arch.minor <= capability[1]


def runs_on(
    arch: GpuArch,
    capability: MajorMinor,
    driver_cuda: MajorMinor | None = None,
    ptx_toolkit: MajorMinor | None = None,
    *,
    exact_suffix: str = "",
) -> bool:
    """Whether code for ``arch`` runs on a GPU of ``capability`` (PTX: if the driver can JIT it).

    The driver check is made only when both ``driver_cuda`` and ``ptx_toolkit`` are known. ``exact_suffix``
    (a cell's ``a``/``f``) also asks that the code be built with that suffix, as a ``90a`` cell needs.
    """
    if exact_suffix and arch.suffix != exact_suffix:
        return False
    if arch.kind is ArchKind.SASS:
        return _arch_fits(arch, capability)
    if arch.kind is ArchKind.PTX:
        fits = _arch_fits(arch, capability) if arch.suffix else capability >= arch.capability
        # A driver JIT-compiles only PTX ISA versions it knows, i.e. from toolkits no newer than itself.
        too_new = driver_cuda is not None and ptx_toolkit is not None and driver_cuda < ptx_toolkit
        return fits and not too_new
    return False  # LTO-IR is consumed by the device linker at build time, never loaded


class GpuMatch(enum.IntEnum):
    """How a wheel serves a GPU, best first: native SASS, compatible SASS, PTX JIT."""

    EXACT = 0
    SASS = 1
    PTX = 2


def gpu_match(
    archs: Iterable[GpuArch],
    capability: MajorMinor,
    driver_cuda: MajorMinor | None = None,
    ptx_toolkit: MajorMinor | None = None,
) -> tuple[GpuMatch, GpuArch] | None:
    """The best way ``archs`` serve this GPU and the arch that does it; ``None`` if none runs."""
    best: tuple[GpuMatch, int, GpuArch] | None = None
    for arch in archs:
        if not runs_on(arch, capability, driver_cuda, ptx_toolkit):
            continue
        if arch.kind is ArchKind.PTX:
            match = GpuMatch.PTX
        else:
            match = GpuMatch.EXACT if arch.capability == capability else GpuMatch.SASS
        key = (match, -arch.number, arch)  # the newest arch that runs is closest to the GPU
        if best is None or key[:2] < best[:2]:
            best = key
    return (best[0], best[2]) if best else None


def rank(
    candidates: Iterable[C],
    archs_of: Callable[[C], Iterable[GpuArch]],
    version_of: Callable[[C], Version],
    capability: MajorMinor,
    driver_cuda: MajorMinor | None = None,
) -> list[tuple[C, GpuMatch]]:
    """The candidates that run on this GPU, best first: exact SASS, then SASS over PTX, then newest version."""
    scored = []
    for c in candidates:
        if (found := gpu_match(archs_of(c), capability, driver_cuda)) is not None:
            scored.append((found[0], -found[1].number, c))
    scored.sort(key=lambda s: version_of(s[2]), reverse=True)  # stable: version breaks the ties below
    scored.sort(key=lambda s: (s[0], s[1]))
    return [(c, match) for match, _, c in scored]


def _archs_text(archs: Iterable[GpuArch]) -> str:
    return ", ".join(str(a) for a in archs) or "no runnable GPU code"


def check_gpu(facts: WheelFacts, machine: Machine, label_cuda: MajorMinor | None = None) -> Verdict:
    """Every device-code member must have SASS for the GPU, or PTX the driver can JIT for it."""
    members = facts.device_binaries
    if not members:
        return Verdict(
            Demand.GPU, True, "no GPU code", _gpu_text(machine), "the wheel carries no device code"
        )
    offered = list(dict.fromkeys(a for b in members for a in (*b.sass, *b.ptx)))
    gpu = machine.gpu
    if gpu is None:
        reason = machine.gpus.reason if not machine.gpus.known else f"no GPU {machine.selected}; pass --gpu"
        return _unknown(Demand.GPU, _archs_text(offered), reason)
    driver = machine.driver_cuda.value
    served: set[str] = set()
    for b in members:
        verdict = _check_member(b, gpu.capability, driver, b.toolkit or facts.toolkit or label_cuda, machine)
        if isinstance(verdict, Verdict):
            return verdict
        served.add(verdict)
    return Verdict(Demand.GPU, True, _archs_text(offered), _gpu_text(machine), "; ".join(sorted(served)))


def _check_member(
    b: BinaryFacts,
    capability: MajorMinor,
    driver: MajorMinor | None,
    toolkit: MajorMinor | None,
    machine: Machine,
) -> Verdict | str:
    if found := gpu_match(b.sass, capability):
        return f"runs {found[1]} SASS"
    if found := gpu_match(b.ptx, capability):
        if driver is None or toolkit is None:
            return f"JIT-compiles {found[1]} (driver not checked; pass --driver)"
        if runs_on(found[1], capability, driver, toolkit):
            return f"JIT-compiles {found[1]}"
        reason = (
            f"{b.path}: {found[1]} PTX from CUDA {format_version(toolkit)} needs a driver for CUDA "
            f"{format_version(toolkit)}+, the driver is for CUDA {format_version(driver)}"
        )
        needs = _archs_text((*b.sass, *b.ptx))
        return Verdict(Demand.GPU, False, needs, _gpu_text(machine), reason, PTX_TOO_NEW)
    if b.sass or b.ptx:
        reason = f"{b.path} has no code for {GpuArch(*capability)}"
    else:
        reason = f"{b.path} has only relocatable / LTO device code, nothing the driver loads"
    return Verdict(
        Demand.GPU, False, _archs_text((*b.sass, *b.ptx)), _gpu_text(machine), reason, NO_KERNEL_IMAGE
    )


def _gpu_text(machine: Machine) -> str:
    gpu = machine.gpu
    return str(gpu.arch) if gpu else "no GPU"


# --- CUDA and torch -----------------------------------------------------------------------------------------


def _label_cuda(name: WheelName) -> tuple[int, int | None] | None:
    claim = name.label_claim
    return (claim.cuda_major, claim.cuda_minor) if claim else None


def check_cuda(facts: WheelFacts, name: WheelName, machine: Machine) -> Verdict:
    """The label's CUDA and the libcudart it links must match torch's CUDA line; the driver must be new enough."""
    label = _label_cuda(name)
    cudarts = sorted({n for b in facts.binaries for n in b.needed if n.startswith("libcudart.so.")})
    if label is None and not cudarts and not facts.device_binaries:
        return Verdict(Demand.CUDA, True, "no CUDA", _cuda_text(machine), "the wheel uses no CUDA runtime")
    said = [f"CUDA {label[0]}" + (f".{label[1]}" if label[1] is not None else "")] if label else []
    needs = ", ".join(said + cudarts) or "CUDA (line unknown)"
    torch_cuda, driver = machine.cuda.value, machine.driver_cuda.value
    # The newest CUDA runtime the process loads: torch's, the label's, the libcudart the wheel links, or
    # (statically linked) the toolkit that built its device code.
    linked = _runtime_majors(cudarts) or (
        [facts.toolkit[0]] if facts.toolkit and facts.device_binaries else []
    )
    runtimes = [r for r in (torch_cuda, (label[0], label[1] or 0) if label else None) if r]
    runtime = max([*runtimes, *((m, 0) for m in linked)], default=None)
    # Minor-version compatibility: a 12.x runtime runs on any 12.y driver, never on an 11.x one.
    if driver is not None and runtime is not None and driver[0] < runtime[0]:
        why = f"the driver is for CUDA {format_version(driver)}, the runtime is {format_version(runtime)}"
        return Verdict(
            Demand.CUDA, False, needs, f"driver CUDA {format_version(driver)}", why, DRIVER_TOO_OLD
        )
    if torch_cuda is None:
        if label is None and not any(b.links_torch or b.torch_symbols for b in facts.binaries):
            # Not a torch extension: only the driver has to run the runtime it loads.
            if driver is None:
                return _unknown(Demand.CUDA, needs, machine.driver_cuda.reason)
            why = "does not link torch; the driver runs its CUDA runtime"
            return Verdict(Demand.CUDA, True, needs, f"driver CUDA {format_version(driver)}", why)
        return _unknown(Demand.CUDA, needs, machine.cuda.reason)
    has = f"torch CUDA {format_version(torch_cuda)}"

    def fail(why: str, error: str) -> Verdict:
        return Verdict(Demand.CUDA, False, needs, has, why, error)

    for lib in cudarts:
        major = lib.removeprefix("libcudart.so.").split(".")[0]
        if major.isdigit() and int(major) != torch_cuda[0]:
            return fail(
                f"links {lib}, torch ships the CUDA {torch_cuda[0]} runtime",
                f"{lib}: cannot open shared object file",
            )
    if label is not None and label[0] != torch_cuda[0]:
        why = f"built for CUDA {label[0]}, torch is built for CUDA {torch_cuda[0]}"
        return fail(why, f"libcudart.so.{label[0]}: cannot open shared object file")
    if label is not None and label[1] is not None and label[1] > torch_cuda[1]:
        why = f"built against a newer CUDA runtime than torch's {format_version(torch_cuda)}"
        return fail(why, "undefined symbol: cuda... (from libcudart)")
    if label is not None and label[1] is not None and label[1] < torch_cuda[1]:
        return Verdict(Demand.CUDA, True, needs, has, "older CUDA minor: runs by minor-version compatibility")
    return Verdict(Demand.CUDA, True, needs, has)


def _runtime_majors(cudarts: Iterable[str]) -> list[int]:
    majors = (lib.removeprefix("libcudart.so.").split(".")[0] for lib in cudarts)
    return [int(m) for m in majors if m.isdigit()]


def _cuda_text(machine: Machine) -> str:
    cuda = machine.cuda.value
    return f"torch CUDA {format_version(cuda)}" if cuda else "no CUDA torch"


def check_torch(facts: WheelFacts, name: WheelName, machine: Machine) -> Verdict:
    """The label's torch minor must be the installed one, and every torch symbol it needs must be exported."""
    claim = name.label_claim
    wanted = claim.torch if claim else None
    symbols = list(dict.fromkeys(s for b in facts.binaries for s in b.torch_symbols))
    links = symbols or any(b.links_torch for b in facts.binaries)
    if wanted is None and not links:
        return Verdict(Demand.TORCH, True, "no torch", _torch_text(machine), "the wheel does not link torch")
    needs = f"torch {format_version(wanted)}" if wanted else "torch (minor unknown)"
    torch = machine.torch.value
    if torch is None:
        return _unknown(Demand.TORCH, needs, machine.torch.reason)
    has = f"torch {format_version(torch.minor)}"
    if wanted is not None and wanted != torch.minor:
        reason = "torch's C++ ABI changes between minor versions"
        first = f"undefined symbol: {symbols[0]}" if symbols else "undefined symbol: _ZN3c10..."
        return Verdict(Demand.TORCH, False, needs, has, reason, first)
    abi = claim.cxx11abi if claim else None
    if abi is not None and torch.cxx11abi is not None and abi != torch.cxx11abi:
        reason = f"built with cxx11abi={abi}, torch uses cxx11abi={torch.cxx11abi}"
        needs_abi, has_abi = f"{needs} cxx11abi={abi}", f"{has} cxx11abi={torch.cxx11abi}"
        return Verdict(Demand.TORCH, False, needs_abi, has_abi, reason, "undefined symbol: _ZN3c10...")
    if torch.exports is not None:
        missing = [s for s in symbols if s not in torch.exports]
        if missing:
            reason = f"{len(missing)} of {len(symbols)} torch symbols are not exported by {torch}"
            return Verdict(Demand.TORCH, False, needs, has, reason, f"undefined symbol: {missing[0]}")
        if wanted is None:
            return Verdict(Demand.TORCH, True, needs, has, f"all {len(symbols)} torch symbols found")
    if wanted is None:
        return _unknown(
            Demand.TORCH, needs, "the wheel's label names no torch version; retag it with --torch"
        )
    return Verdict(Demand.TORCH, True, needs, has)


def _torch_text(machine: Machine) -> str:
    torch = machine.torch.value
    return f"torch {format_version(torch.minor)}" if torch else "no torch"


# --- interpreter, CPU, OS, C libraries ---------------------------------------------------------------------


def check_python(name: WheelName, machine: Machine) -> Verdict:
    """One of the wheel's tags must be one the interpreter accepts."""
    tags = machine.python_tags.value
    if tags is None:
        return _unknown(Demand.PYTHON, name.tag_text, machine.python_tags.reason)
    wanted = name.tags
    if hit := next((t for t in tags if t in wanted), None):
        return Verdict(Demand.PYTHON, True, name.tag_text, str(hit))
    error = f"ERROR: {name} is not a supported wheel on this platform."
    interp = {(t.interpreter, t.abi) for t in wanted}
    if any((t.interpreter, t.abi) in interp for t in tags):
        plats = ", ".join(sorted({t.platform for t in wanted}))
        has = next((t.platform for t in tags if t.platform != "any"), "any")
        return Verdict(Demand.PYTHON, False, plats, has, "no platform tag this machine accepts", error)
    best = tags[0] if tags else None
    has = f"{best.interpreter}-{best.abi}" if best else "no tags"
    needs = ", ".join(sorted({f"{i}-{a}" for i, a in interp}))
    return Verdict(Demand.PYTHON, False, needs, has, "built for another Python or ABI", error)


def check_cpu(facts: WheelFacts, machine: Machine) -> Verdict:
    """Every native member must be built for this CPU."""
    cpus = facts.cpus
    if not cpus:
        return Verdict(Demand.CPU, True, "any CPU", machine.cpu.value or "unknown", "no native code")
    needs = ", ".join(cpus)
    if machine.cpu.value is None:
        return _unknown(Demand.CPU, needs, machine.cpu.reason)
    have = normalize_cpu(machine.cpu.value)
    wrong = [c for c in cpus if c != have]
    if not wrong:
        return Verdict(Demand.CPU, True, needs, have)
    elf_class = "wrong ELF class: ELFCLASS32" if wrong[0] in ("i686", "armv7l") and "64" in have else ""
    error = elf_class or "cannot open shared object file: No such file or directory"
    return Verdict(Demand.CPU, False, needs, have, f"native code for {wrong[0]}, this CPU is {have}", error)


_OS_FORMATS = {
    "linux": BinaryFormat.ELF,
    "win32": BinaryFormat.PE,
    "cygwin": BinaryFormat.PE,
    "darwin": BinaryFormat.MACHO,
}
_OS_ERRORS = {
    BinaryFormat.ELF: "invalid ELF header",
    BinaryFormat.PE: "DLL load failed: %1 is not a valid Win32 application",
    BinaryFormat.MACHO: "not a mach-o file",
}


def check_os(facts: WheelFacts, machine: Machine) -> Verdict:
    """Every native member must be in the binary format this OS loads."""
    formats = sorted({b.format.value for b in facts.binaries})
    if not formats:
        return Verdict(Demand.OS, True, "any OS", machine.os.value or "unknown", "no native code")
    needs = ", ".join(formats)
    if machine.os.value is None:
        return _unknown(Demand.OS, needs, machine.os.reason)
    native = _OS_FORMATS.get(machine.os.value, BinaryFormat.ELF)  # other unixes load ELF
    has = f"{machine.os.value} ({native.value})"
    wrong = [b for b in facts.binaries if b.format is not native]
    if not wrong:
        return Verdict(Demand.OS, True, needs, has)
    reason = f"{wrong[0].path} is {wrong[0].format.value}"
    return Verdict(Demand.OS, False, needs, has, reason, _OS_ERRORS[native])


def check_glibc(facts: WheelFacts, machine: Machine) -> Verdict:
    """The glibc and libstdc++ here must define the newest ``GLIBC_``/``GLIBCXX_`` versions the wheel needs."""
    floor = facts.glibc
    cxx = max((b.glibcxx for b in facts.binaries if b.glibcxx), default=None)
    parts = ([f"GLIBC_{format_dotted(floor)}"] if floor else []) + ([format_glibcxx(cxx)] if cxx else [])
    if not parts:
        return Verdict(
            Demand.GLIBC, True, "no glibc floor", _glibc_text(machine), "no versioned C library needs"
        )
    needs = ", ".join(parts)
    glibc = machine.glibc.value
    if floor and glibc is None:
        return _unknown(Demand.GLIBC, needs, machine.glibc.reason)
    has = _glibc_text(machine)
    if floor and glibc is not None and floor > glibc:
        error = f"version 'GLIBC_{format_dotted(floor)}' not found"
        return Verdict(Demand.GLIBC, False, needs, has, f"glibc here is {format_version(glibc)}", error)
    have_cxx = machine.glibcxx.value
    if cxx and have_cxx is not None and cxx > have_cxx:
        error = f"libstdc++.so.6: version '{format_glibcxx(cxx)}' not found"
        return Verdict(
            Demand.GLIBC, False, needs, has, f"libstdc++ here defines up to {format_glibcxx(have_cxx)}", error
        )
    note = "" if not cxx or have_cxx else f"libstdc++ not checked: {machine.glibcxx.reason}"
    return Verdict(Demand.GLIBC, True, needs, has, note)


def _glibc_text(machine: Machine) -> str:
    parts = []
    if machine.glibc.value:
        parts.append(f"GLIBC_{format_version(machine.glibc.value)}")
    if machine.glibcxx.value:
        parts.append(format_glibcxx(machine.glibcxx.value))
    return ", ".join(parts) or "unknown"


def judge(facts: WheelFacts, name: WheelName, machine: Machine) -> tuple[Verdict, ...]:
    """One verdict per demand, in :class:`Demand` order."""
    label = _label_cuda(name)
    label_cuda = (label[0], label[1]) if label and label[1] is not None else None
    return (
        check_gpu(facts, machine, label_cuda),
        check_torch(facts, name, machine),
        check_cuda(facts, name, machine),
        check_python(name, machine),
        check_cpu(facts, machine),
        check_os(facts, machine),
        check_glibc(facts, machine),
    )
