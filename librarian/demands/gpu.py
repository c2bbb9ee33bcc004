"""The GPU demand: the members that load must have SASS for the GPU, or PTX the driver can JIT for it.

NVIDIA's rules (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility): SASS
``sm_XY`` runs on a GPU of capability X.Z when Z >= Y, never across majors; ``sm_XYa`` only on X.Y;
``sm_XYf`` on its family (same major, minor >= Y); PTX ``compute_XY`` is JIT-compiled on any GPU of
capability >= X.Y whose driver knows that PTX ISA. A wheel serves a GPU when the members that load have
code for it: all of them -> runs; some -> runs, partly (naming the others); none -> does not run.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from librarian.coords import ArchKind, GpuArch, MajorMinor, format_version
from librarian.demands.base import Demand, Verdict, Wheel, some, unknown
from librarian.demands.members import NO_DEVICE_CODE, DeviceCode, Loading, Member, device_code, loading, names
from librarian.demands.memo import by_identity
from librarian.facts import arch_order
from librarian.gpus import find_gpu
from librarian.machine import Machine

NO_KERNEL_IMAGE = "CUDA error: no kernel image is available for execution on the device"
PTX_TOO_NEW = "CUDA error: the provided PTX was compiled with an unsupported toolchain"


def runs_on(
    arch: GpuArch, capability: MajorMinor, driver: MajorMinor | None = None, toolkit: MajorMinor | None = None
) -> bool:
    """Whether code for ``arch`` runs on a GPU of ``capability`` (PTX: also whether the driver can JIT it).

    The driver check is made only when both ``driver`` and the PTX's ``toolkit`` are known.
    """
    if arch.kind is ArchKind.LTO:
        return False  # LTO-IR is consumed by the device linker at build time, never loaded
    if arch.suffix == "a":
        fits = arch.capability == capability  # arch-specific: exactly that GPU
    elif arch.suffix == "f" or arch.kind is ArchKind.SASS:
        fits = arch.major == capability[0] and arch.minor <= capability[1]  # same major (family)
    else:
        fits = capability >= arch.capability  # plain PTX: any newer GPU
    if arch.kind is ArchKind.PTX and driver is not None and toolkit is not None:
        # A driver JIT-compiles only PTX ISA versions it knows, i.e. from toolkits no newer than itself.
        fits = fits and driver >= toolkit
    return fits


class GpuMatch(enum.IntEnum):
    """How code serves a GPU, best first: its own SASS, compatible SASS, PTX JIT."""

    EXACT = 0
    SASS = 1
    PTX = 2


def gpu_match(
    archs: Iterable[GpuArch],
    capability: MajorMinor,
    driver: MajorMinor | None = None,
    toolkit: MajorMinor | None = None,
) -> tuple[GpuMatch, GpuArch] | None:
    """The best way ``archs`` serve this GPU and the arch that does it; ``None`` if none runs."""
    best: tuple[GpuMatch, int, GpuArch] | None = None
    for arch in archs:
        if not runs_on(arch, capability, driver, toolkit):
            continue
        if arch.kind is ArchKind.PTX:
            match = GpuMatch.PTX
        else:
            match = GpuMatch.EXACT if arch.capability == capability else GpuMatch.SASS
        key = (match, -arch.number, arch)  # the newest arch that runs is closest to the GPU
        if best is None or key[:2] < best[:2]:
            best = key
    return (best[0], best[2]) if best else None


@dataclass(frozen=True, slots=True)
class GpuNeed:
    """The device code a wheel carries, grouped by what loads; the label's CUDA line as a fallback."""

    code: DeviceCode
    label_cuda: MajorMinor | None = None

    @property
    def text(self) -> str:
        """``sm_80, sm_86, compute_90``: every arch any member offers."""
        return _archs_text(self.code)


@by_identity()
def _archs_text(code: DeviceCode) -> str:
    # Asked once per verdict; thousands of members fold to a few archs, worked out once per wheel.
    archs = sorted({a for m in code.all_members for a in (*m.sass, *m.ptx)}, key=arch_order)
    return ", ".join(str(a) for a in archs) or ("no runnable GPU code" if not code.empty else "no GPU code")


def needs(wheel: Wheel) -> GpuNeed:
    """The GPU code of a wheel: from its facts, else the cell it is filed in, else none."""
    claim = wheel.label_claim
    label_cuda = claim.cuda_line if claim else None
    if wheel.facts is not None:
        return GpuNeed(device_code(wheel.facts), label_cuda)
    if wheel.filed_for is not None:
        member = Member("(its cell)", (wheel.filed_for,), ())
        return GpuNeed(DeviceCode((member,), ()), label_cuda)  # no facts: the code its cell says
    return GpuNeed(NO_DEVICE_CODE, label_cuda)


@dataclass(frozen=True, slots=True)
class Serving:
    """What serves the GPU: the arch whose code runs there, and how (its own SASS, compatible SASS, PTX)."""

    arch: GpuArch
    match: GpuMatch

    @property
    def native(self) -> bool:
        """Whether machine code runs (no JIT): the wheel is filed under this GPU."""
        return self.match is not GpuMatch.PTX

    @property
    def kind(self) -> str:
        """``exact`` (its own SASS), ``sass`` (compatible SASS) or ``ptx``, for JSON."""
        return {GpuMatch.EXACT: "exact", GpuMatch.SASS: "sass", GpuMatch.PTX: "ptx"}[self.match]

    def __str__(self) -> str:
        """How a sentence says it: ``its own sm_89 SASS``, ``compatible sm_86 SASS``, ``compute_90 PTX (...)``."""
        if self.match is GpuMatch.PTX:
            return f"{self.arch} PTX (JIT-compiled at first use)"
        return f"{'its own' if self.match is GpuMatch.EXACT else 'compatible'} {self.arch} SASS"


@dataclass(frozen=True, slots=True)
class _Served:
    match: GpuMatch | None  # None: no code for the GPU
    arch: GpuArch | None = None
    blocked: bool = False  # PTX that fits, but the driver is too old to JIT it


def _serve(
    m: Member, capability: MajorMinor, driver: MajorMinor | None, toolkit: MajorMinor | None
) -> _Served:
    if found := gpu_match(m.sass, capability):
        return _Served(found[0], found[1])
    if found := gpu_match(m.ptx, capability):
        if runs_on(found[1], capability, driver, m.toolkit or toolkit):
            return _Served(GpuMatch.PTX, found[1])
        return _Served(None, found[1], blocked=True)
    return _Served(None)


def check(need: GpuNeed, machine: Machine) -> Verdict:
    """Judge the GPU demand against the machine's selected GPU (and its driver, for PTX)."""
    return judge(need, machine)[0]


def judge(need: GpuNeed, machine: Machine) -> tuple[Verdict, Serving | None]:
    """The GPU verdict and what serves the GPU (``None``: no device code, GPU unknown, or it does not run)."""
    if need.code.empty:
        return Verdict(
            Demand.GPU, True, "no GPU code", _gpu_text(machine), "the wheel carries no device code"
        ), None
    gpu = machine.gpu
    if gpu is None:
        reason = machine.gpus.reason if not machine.gpus.known else f"no GPU {machine.selected}; pass --gpu"
        return unknown(Demand.GPU, need.text, reason), None
    line = machine.cuda.value or need.label_cuda
    return _judge(need, gpu.capability, machine.driver_cuda.value, line, _gpu_text(machine))


@dataclass(frozen=True, slots=True)
class _Unit:
    """What loads as one: a member, or an undecided choice of CUDA-line alternatives."""

    label: str
    members: tuple[Member, ...]

    @property
    def own(self) -> bool:
        return any(m.own for m in self.members)


@dataclass(frozen=True, slots=True)
class _Kind:
    """Loaded members that carry the same code (and are alike own or vendored): judged as one."""

    members: tuple[Member, ...]
    labels: tuple[tuple[int, str], ...]  # (place among the loaded members, path): messages keep that order
    own: bool


@by_identity()
def _loading(code: DeviceCode, line: MajorMinor | None) -> Loading:
    return loading(code, line)


@by_identity()
def _units(load: Loading) -> tuple[_Unit, ...]:
    return tuple(_Unit(m.path, (m,)) for m in load.loaded)


@by_identity()
def _kinds(load: Loading) -> tuple[_Kind, ...]:
    """The loaded members by kind of code, in order of first appearance (asked once per GPU judged)."""
    groups: dict[tuple[object, ...], list[tuple[int, Member]]] = {}
    for i, m in enumerate(load.loaded):
        groups.setdefault((m.sass, m.ptx, m.toolkit, m.own), []).append((i, m))
    return tuple(
        _Kind(tuple(m for _, m in g), tuple((i, m.path) for i, m in g), g[0][1].own) for g in groups.values()
    )


def _judge(
    need: GpuNeed, capability: MajorMinor, driver: MajorMinor | None, line: MajorMinor | None, has: str
) -> tuple[Verdict, Serving | None]:
    """The verdict, and what serves the GPU: the best arch of the members that serve it. One pass gives both.

    The package's own extension modules decide: when some carry device code and none has code for this
    GPU, the wheel does not run here, whatever a vendored library carries.
    """
    load = _loading(need.code, line)
    kinds = _kinds(load)
    undecided = [_Unit(c.describe(), c.members) for c in load.undecided]
    if not kinds and not undecided:
        why = load.missing_text(line) or "no device-code member loads"
        return Verdict(
            Demand.GPU, False, need.text, has, why, NO_KERNEL_IMAGE, not_loaded=names(load.not_loaded)
        ), None
    served, lacking, blocked = _serve_all(kinds, undecided, capability, driver, need.label_cuda)
    lacking += load.missing_text(line).split("; ") if load.missing else []
    not_loaded = names(load.not_loaded)
    if (any(k.own for k in kinds) or any(u.own for u in undecided)) and not any(own for own, _ in served):
        units = [*_units(load), *undecided]  # only on failing: the message names them
        own_units = [u for u in units if u.own]
        return _fail(
            need, capability, driver, has, own_units, blocked, not_loaded, vendored=bool(served)
        ), None
    if not served:
        units = [*_units(load), *undecided]
        return _fail(need, capability, driver, has, units, blocked, not_loaded), None
    return _runs(need, capability, driver, has, served, lacking, not_loaded, undecided=bool(load.undecided))


def _serve_all(
    kinds: Sequence[_Kind], undecided: Sequence[_Unit], capability: MajorMinor, driver: MajorMinor | None,
    label_cuda: MajorMinor | None,
) -> tuple[list[tuple[bool, _Served]], list[str], list[tuple[str, Member, _Served]]]:  # fmt: skip
    """How each kind of code (and each unit whose member depends on the CUDA line) serves the GPU: those
    that serve (own, how), the labels of those with no code for it, and what a driver or toolkit blocks.
    Members that carry the same code are served alike: each kind once per GPU, not each member
    (flashinfer-cubin: 16,000 cubins of a few kinds)."""
    served: list[tuple[bool, _Served]] = []
    missing_code: list[tuple[int, str]] = []
    blocked: list[tuple[str, Member, _Served]] = []
    for kind in kinds:
        r = _serve(kind.members[0], capability, driver, label_cuda)
        if r.match is not None:
            served.append((kind.own, r))
            continue
        missing_code += kind.labels
        if r.blocked:
            blocked += [(m.path, m, r) for m in kind.members]
    lacking = [label for _, label in sorted(missing_code)]
    for unit in undecided:
        results = [(m, _serve(m, capability, driver, label_cuda)) for m in unit.members]
        best = min((r for _, r in results if r.match is not None), key=lambda r: r.match or 0, default=None)
        if best is not None:
            served.append((unit.own, best))
            continue
        lacking.append(unit.label)
        blocked += [(unit.label, m, r) for m, r in results if r.blocked]
    return served, lacking, blocked


def _runs(
    need: GpuNeed, capability: MajorMinor, driver: MajorMinor | None, has: str, served: list[tuple[bool, _Served]],
    lacking: list[str], not_loaded: tuple[str, ...], *, undecided: bool,
) -> tuple[Verdict, Serving]:  # fmt: skip
    """The verdict of a wheel that runs here (some member serves the GPU), partly where ``lacking`` members
    have no code for it; and what serves it: the best arch."""
    worst = max(r.match or GpuMatch.EXACT for _, r in served)
    top = min(served, key=lambda s: (s[1].match or 0, -(s[1].arch.number if s[1].arch else 0)))[1]
    assert top.match is not None and top.arch is not None
    serving = Serving(top.arch, top.match)
    how = "; ".join(sorted({_how(r, driver) for _, r in served}))
    if undecided:
        how += " (which member loads depends on torch's CUDA line; pass --cuda)"
    exact = worst is GpuMatch.EXACT
    if lacking:
        reason = (
            f"runs, partly: {some(lacking)} {'has' if len(lacking) == 1 else 'have'} no code for "
            f"{GpuArch(*capability)} (calls into {'it' if len(lacking) == 1 else 'them'} fail); {how}"
        )
        return Verdict(Demand.GPU, True, need.text, has, reason, partly=tuple(lacking), not_loaded=not_loaded,
                       exact=exact), serving  # fmt: skip
    return Verdict(Demand.GPU, True, need.text, has, how, not_loaded=not_loaded, exact=exact), serving


def _how(r: _Served, driver: MajorMinor | None) -> str:
    if r.match is GpuMatch.PTX:
        return f"JIT-compiles {r.arch}" + ("" if driver else " (driver not checked; pass --driver)")
    return f"runs {r.arch} SASS"


def _fail(
    need: GpuNeed,
    capability: MajorMinor,
    driver: MajorMinor | None,
    has: str,
    units: Sequence[_Unit],
    blocked: Sequence[tuple[str, Member, _Served]],
    not_loaded: tuple[str, ...],
    *,
    vendored: bool = False,
) -> Verdict:
    if blocked and not vendored:
        _, m, r = blocked[0]
        tk = m.toolkit or need.label_cuda
        assert tk is not None and driver is not None  # blocked only when both are known
        reason = (
            f"{m.path}: {r.arch} PTX from CUDA {format_version(tk)} needs a driver for CUDA "
            f"{format_version(tk)}+, the driver is for CUDA {format_version(driver)}"
        )
        return Verdict(Demand.GPU, False, need.text, has, reason, PTX_TOO_NEW, not_loaded=not_loaded)
    members = [m for u in units for m in u.members]
    arch = GpuArch(*capability)
    if all(m.relocatable_only for m in members):
        reason = f"{members[0].path} has only relocatable / LTO device code, nothing the driver loads"
    elif len(units) == 1:
        reason = f"{units[0].label} has no code for {arch}"
    else:
        reason = f"none of {some([u.label for u in units])} has code for {arch}"
    if vendored:
        reason += " (only libraries it vendors do; its own extension modules decide)"
    # The CUDA that built the code (its members' toolkit, else the label's line) is the line to judge.
    toolkits = [m.toolkit for m in members if m.toolkit is not None]
    reason += _no_toolkit(capability, max(toolkits) if toolkits else need.label_cuda)
    return Verdict(Demand.GPU, False, need.text, has, reason, NO_KERNEL_IMAGE, not_loaded=not_loaded)


def _no_toolkit(capability: MajorMinor, line: MajorMinor | None) -> str:
    """Why rebuilding on the same CUDA line would not help: that CUDA cannot target this GPU at all."""
    real = find_gpu(capability)
    if line is None or real is None or real.compiled_by(line):
        return ""
    return f"; no CUDA {format_version(line)} build can serve it ({real.toolkits()} targets {GpuArch(*capability)})"


def _gpu_text(machine: Machine) -> str:
    gpu = machine.gpu
    return str(gpu.arch) if gpu else "no GPU"


def no_cell_words(archs: Sequence[GpuArch]) -> str:
    """Why a wheel with device code is filed under no GPU, in words true to its code: SASS no GPU that
    exists runs natively, or no SASS at all (its PTX is JIT-compiled, from its oldest PTX arch up)."""
    listed = ", ".join(str(a) for a in archs)
    if not any(a.kind is ArchKind.SASS for a in archs):
        ptx = [a for a in archs if a.kind is ArchKind.PTX]
        if ptx:
            low = min(ptx, key=lambda a: (a.major, a.minor))
            return f"it has no SASS, only PTX ({listed}): the driver JIT-compiles it on sm{low.sm} and newer GPUs"
    return f"its SASS runs natively on no GPU that exists ({listed})"
