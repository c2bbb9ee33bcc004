"""Which members of a wheel load on an NVIDIA machine: the loading rules every demand counts by.

Real wheels are not one library. bitsandbytes ships ``libbitsandbytes_cuda118.so`` ... ``_cuda132.so`` and
loads the one that matches torch's CUDA; some wheels ship one member per ``libcudart`` major. Members whose
names differ only by a CUDA version token, or that link different ``libcudart`` majors, are alternatives:
the machine's CUDA line picks one and the others never load. Members for other vendors' GPUs (Intel XPU,
AMD ROCm) and the CPU-only fallback of a CUDA library never load on an NVIDIA machine
(:func:`never_loaded`). A package's own extension modules (``PyInit_*``) are told from the libraries it
vendors (:func:`is_own`): the GPU demand asks the own modules first. Pure.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from librarian.coords import GpuArch, MajorMinor, format_version
from librarian.demands.base import OTHER_CUDA_LINE, Wheel
from librarian.demands.memo import by_identity
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts, library_name

# A CUDA version token in a member's file name: _cuda118, -cu128, .cuda13 (not inside a longer word).
_TOKEN = re.compile(r"(?<![a-z0-9])(cuda|cu)(\d{2,3})(?![0-9])", re.IGNORECASE)
# Another vendor's GPU in a member's name (libbitsandbytes_xpu2025.so, _rocm62, libfoo_hip.so) or in the
# libraries it needs: such a member is never loaded where the GPU is NVIDIA's.
_VENDOR_TOKEN = re.compile(r"(?<![a-z])(xpu|sycl|rocm|hip)(?![a-z])", re.IGNORECASE)
_VENDOR_NAMES = {"xpu": "Intel XPU", "sycl": "Intel XPU", "rocm": "AMD ROCm", "hip": "AMD ROCm"}
_VENDOR_LIBS = (
    ("libsycl", "Intel XPU"),
    ("libze_loader", "Intel XPU"),
    ("libamdhip64", "AMD ROCm"),
    ("libhsa-runtime64", "AMD ROCm"),
    ("librocblas", "AMD ROCm"),
)
# The CPU-only build beside CUDA builds of the same library: libbitsandbytes_cpu.so.
_CPU_TOKEN = re.compile(r"(?<![a-z0-9])cpu(?![a-z0-9])", re.IGNORECASE)
# An extension module by its file name, where the facts do not say (an older index): no ``lib`` prefix,
# a module name, an optional ABI tag, ``.so``/``.pyd`` (``_C.abi3.so``, ``ops.cpython-312-x86_64-linux-gnu.so``).
_MODULE_NAME = re.compile(r"(?!lib)[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)?\.(?:so|pyd)", re.IGNORECASE)


def never_loaded(facts: WheelFacts) -> dict[str, str]:
    """Members that never load on an NVIDIA machine, and why: another vendor's GPU, or a CPU-only fallback."""
    return dict(_never_loaded(facts))


# The judgement asks these of one wheel's facts many times (once per GPU cell, per demand); a wheel of
# 16,000 members made each ask cost seconds. Facts are frozen values: equal facts give equal answers.
@by_identity()
def _never_loaded(facts: WheelFacts) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    cuda_stems = {
        (posixpath.dirname(b.path), _TOKEN.sub("{x}", posixpath.basename(b.path)))
        for b in facts.binaries
        if _TOKEN.search(posixpath.basename(b.path))
    }
    for b in facts.binaries:
        if b.has_device_code:
            continue  # NVIDIA device code: this member is for NVIDIA GPUs, whatever its name says
        base = posixpath.basename(b.path)
        vendor = _VENDOR_TOKEN.search(base)
        needs = [library_name(n) for n in b.needed]
        lib = next((who for prefix, who in _VENDOR_LIBS if any(n.startswith(prefix) for n in needs)), None)
        if vendor or lib:
            found[b.path] = f"for {_VENDOR_NAMES[vendor[1].lower()] if vendor else lib} GPUs"
        elif (
            _CPU_TOKEN.search(base) and (posixpath.dirname(b.path), _CPU_TOKEN.sub("{x}", base)) in cuda_stems
        ):
            found[b.path] = "the CPU-only build of a CUDA library"
    return tuple(found.items())


def is_own(b: BinaryFacts) -> bool:
    """Whether a member is one of the package's own extension modules, not a library it vendors."""
    if b.extension is not None:
        return b.extension
    return (
        b.format is not BinaryFormat.CUDA and _MODULE_NAME.fullmatch(posixpath.basename(b.path)) is not None
    )


@dataclass(frozen=True, slots=True)
class Member:
    """One device-code member, reduced to what loading and the GPU rules need."""

    path: str
    sass: tuple[GpuArch, ...]
    ptx: tuple[GpuArch, ...]
    toolkit: MajorMinor | None = None
    relocatable_only: bool = False  # only -rdc / LTO code: nothing the driver loads
    cuda_token: MajorMinor | None = None  # from the name: libbitsandbytes_cuda128.so -> 12.8
    cudart: int | None = None  # the libcudart major it links
    own: bool = False  # one of the package's own extension modules (not a vendored library)

    @classmethod
    def from_binary(cls, b: BinaryFacts) -> Member:
        """The member a native or loose device-code binary is."""
        token = _token(b.path)
        return cls(b.path, b.sass, b.ptx, b.toolkit, not (b.sass or b.ptx), token, b.cudart_major, is_own(b))

    @property
    def name(self) -> str:
        """The file name alone, for messages: ``libbitsandbytes_cuda118.so``."""
        return posixpath.basename(self.path)


def _token(path: str) -> MajorMinor | None:
    found = _TOKEN.findall(posixpath.basename(path))
    if len(found) != 1:
        return None
    digits = found[0][1]
    if len(digits) == 3:  # cu118, cuda128: major and minor
        return int(digits[:2]), int(digits[2])
    if digits[0] == "1":  # cuda12, cu13: a major alone, read as X.0 (older than any X.y line)
        return int(digits), 0
    return int(digits[0]), int(digits[1])  # cu92


@dataclass(frozen=True, slots=True)
class Choice:
    """Members of which the machine's CUDA line loads at most one."""

    members: tuple[Member, ...]
    by: str  # "name" (a CUDA token in the file names) or "libcudart" (different majors linked)

    def describe(self) -> str:
        """``libbitsandbytes_cuda{118,...,132}.so``, or the names joined."""
        return ", ".join(m.name for m in self.members)

    def pick(self, line: MajorMinor) -> Member | None:
        """The member a machine whose CUDA line is ``line`` loads, if any."""
        if self.by == "libcudart":
            return next((m for m in self.members if m.cudart == line[0]), None)
        tokens = [m for m in self.members if m.cuda_token is not None]
        if exact := next((m for m in tokens if m.cuda_token == line), None):
            return exact
        # Minor-version compatibility: a 12.6 build runs on a 12.8 runtime; never across majors.
        older = [m for m in tokens if m.cuda_token and m.cuda_token[0] == line[0] and m.cuda_token <= line]
        return max(older, key=lambda m: m.cuda_token or (0, 0), default=None)


@dataclass(frozen=True, slots=True)
class DeviceCode:
    """A wheel's device-code members: those that always load, and the sets of CUDA-line alternatives."""

    fixed: tuple[Member, ...]
    choices: tuple[Choice, ...]

    @property
    def empty(self) -> bool:
        """Whether the wheel carries no device code at all."""
        return not self.fixed and not self.choices

    @property
    def all_members(self) -> tuple[Member, ...]:
        """Every device-code member, loaded or not."""
        return (*self.fixed, *(m for c in self.choices for m in c.members))


NO_DEVICE_CODE = DeviceCode((), ())


def own_package(facts: WheelFacts) -> str | None:
    """The wheel's own import package (``sgl_kernel/`` of sgl_kernel-*.whl), where its members sit in one;
    extension modules elsewhere (a vendored package's binding, ``_mscclpp.*.so`` at the top) are not its own."""
    stem = facts.filename.split("-", 1)[0].lower()
    return stem if any(b.path.lower().startswith(stem + "/") for b in facts.binaries) else None


@by_identity()
def device_code(facts: WheelFacts) -> DeviceCode:
    """Group a wheel's device-code members into fixed ones and CUDA-line alternatives (asked again and
    again of one wheel's facts by the judgement: kept for the last few, as :func:`_never_loaded`)."""
    never = never_loaded(facts)
    package = own_package(facts)
    # A stub without kernels serves no GPU and blocks none: it is no device-code member at all.
    members = [Member.from_binary(b) for b in facts.binaries if b.has_kernels and b.path not in never]
    if package is not None:
        members = [m if m.path.lower().startswith(package + "/") else replace(m, own=False) for m in members]
    groups: dict[tuple[str, str], list[Member]] = defaultdict(list)
    for m in members:
        if m.cuda_token is not None:
            key = (posixpath.dirname(m.path), _TOKEN.sub("{cuda}", posixpath.basename(m.path)))
            groups[key].append(m)
    choices: list[Choice] = []
    chosen: set[str] = set()
    for group in groups.values():
        if len({m.cuda_token for m in group}) > 1:
            choices.append(Choice(tuple(sorted(group, key=lambda m: m.cuda_token or (0, 0))), "name"))
            chosen.update(m.path for m in group)
    rest = [m for m in members if m.path not in chosen]
    linked = [m for m in rest if m.cudart is not None]
    if len({m.cudart for m in linked}) > 1:
        choices.append(Choice(tuple(sorted(linked, key=lambda m: m.cudart or 0)), "libcudart"))
        chosen.update(m.path for m in linked)
    fixed = tuple(m for m in members if m.path not in chosen)
    return DeviceCode(fixed, tuple(choices))


@dataclass(frozen=True, slots=True)
class Loading:
    """What a machine loads: members, alternatives it cannot decide (line unknown), and what stays out."""

    loaded: tuple[Member, ...]
    undecided: tuple[Choice, ...]
    not_loaded: tuple[Member, ...]
    missing: tuple[Choice, ...]  # alternatives with no member for this line: none of them loads

    @property
    def may_load(self) -> tuple[Member, ...]:
        """The members that load, or may: those loaded, and every alternative of an undecided choice."""
        return (*self.loaded, *(m for c in self.undecided for m in c.members))

    def missing_text(self, line: MajorMinor | None) -> str:
        """``none of a.so, b.so is for CUDA 12.9``, for messages."""
        where = format_version(line) if line else "this CUDA line"
        return "; ".join(f"none of {c.describe()} is for CUDA {where}" for c in self.missing)


def loading(code: DeviceCode, line: MajorMinor | None) -> Loading:
    """Which members load on a machine whose CUDA line is ``line`` (``None``: not known)."""
    loaded = list(code.fixed)
    undecided: list[Choice] = []
    not_loaded: list[Member] = []
    missing: list[Choice] = []
    for choice in code.choices:
        if line is None:
            undecided.append(choice)
            continue
        picked = choice.pick(line)
        if picked is None:
            missing.append(choice)
        else:
            loaded.append(picked)
        not_loaded += [m for m in choice.members if m is not picked]
    return Loading(tuple(loaded), tuple(undecided), tuple(not_loaded), tuple(missing))


def names(members: Sequence[Member]) -> tuple[str, ...]:
    """The members' paths, for verdict fields."""
    return tuple(m.path for m in members)


@dataclass(frozen=True, slots=True)
class Seen:
    """A wheel as an NVIDIA machine sees it, and as one CUDA line loads it."""

    nvidia: Wheel  # other vendors' members and CPU-only fallbacks gone
    loaded: Wheel  # and the alternatives this line does not pick
    picked: tuple[str, ...]  # the CUDA-line alternatives this line loads
    undecided: tuple[str, ...]  # alternatives no line picks yet (the line is unknown), described
    skipped: tuple[tuple[str, str], ...]  # (member, why it never loads)

    @property
    def loads(self) -> tuple[str, ...]:
        """The members that load (or may)."""
        return tuple(b.path for b in self.loaded.facts.binaries) if self.loaded.facts else ()


@by_identity()
def seen(wheel: Wheel, line: MajorMinor | None) -> Seen:
    """The wheel as an NVIDIA machine sees it, and as the CUDA line ``line`` loads it (``None``: not known)."""
    facts = wheel.facts
    if facts is None:
        return Seen(wheel, wheel, (), (), ())
    never = never_loaded(facts)
    nvidia = WheelFacts(facts.filename, tuple(b for b in facts.binaries if b.path not in never))
    code = device_code(nvidia)
    load = loading(code, line)
    out = {m.path for m in load.not_loaded}
    loaded = WheelFacts(facts.filename, tuple(b for b in nvidia.binaries if b.path not in out))
    in_choices = {m.path for c in code.choices for m in c.members}
    picked = tuple(m.path for m in load.loaded if m.path in in_choices)
    skipped = tuple(sorted(never.items())) + tuple((m.path, OTHER_CUDA_LINE) for m in load.not_loaded)
    return Seen(
        replace(wheel, facts=nvidia),
        replace(wheel, facts=loaded),
        picked,
        tuple(c.describe() for c in load.undecided),
        skipped,
    )
