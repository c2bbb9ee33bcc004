"""The torch demand: which torch lines a wheel runs on, as its bytes bind it.

PyTorch has no stable C++ ABI: an extension that imports a mangled C++ torch symbol (``_ZN3c10...``,
``_ZN2at...``, ``_ZN5torch...``) built against torch 2.8 fails to load under 2.9 with ``undefined symbol``:
it is bound to its **exact** line. One that links libtorch but imports only its C shim (``aoti_torch_*``,
``torch_*``: built with ``torch/csrc/stable`` and ``TORCH_TARGET_VERSION``) runs on its line and every later
one of the same major: **stable ABI**, from its **floor**: the newest torch line among the shim functions it
imports (:mod:`librarian.stable_abi`'s table; a build made with 2.10 that imports only 2.9 functions runs on
2.9), never above its build line. One that links no torch at all runs with **any** torch. The rule is "no
mangled torch symbol", not a list of allowed prefixes. The torch line a wheel was built against comes from
its label.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from librarian.coords import MajorMinor, format_version
from librarian.demands.base import Cause, Demand, Verdict, Wheel, unknown
from librarian.facts import BinaryFacts
from librarian.machine import Machine
from librarian.stable_abi import Floor, newest_import, stable_floor

UNDEFINED_TORCH_SYMBOL = "undefined symbol: _ZN3c10..."
UNDEFINED_SHIM_SYMBOL = "undefined symbol: aoti_torch_... (a C shim function newer than this torch)"


class Binding(enum.Enum):
    """How a wheel's bytes bind it to torch lines."""

    NONE = "none"  # links no torch: every line
    STABLE = "stable"  # torch's stable C ABI only: its line and later ones of the same major
    EXACT = "exact"  # a mangled C++ torch symbol: its line only


@dataclass(frozen=True, slots=True)
class TorchNeed:
    """The torch line the label names (if any), how the bytes bind the wheel, and the symbols they need."""

    minor: MajorMinor | None
    binding: Binding = Binding.EXACT
    symbol: str | None = None  # the mangled symbol that binds an exact wheel (None: not known)
    cxx11abi: bool | None = None
    symbols: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()  # the torch libraries its members link (libc10.so, torch_cpu.dll)
    floor: Floor | None = None  # a stable-ABI build's oldest torch line, from its shim imports
    requirement: SpecifierSet | None = (
        None  # its METADATA's Requires-Dist on torch (pip never sees it: --no-deps)
    )
    pinned: bool = False  # ``minor`` is the one line its Requires-Dist admits (no label, no path says it)

    @property
    def first_line(self) -> MajorMinor | None:
        """The oldest torch line it runs on: a stable build's floor, else its own line."""
        return self.floor.line if self.floor is not None else self.minor

    @property
    def links(self) -> bool:
        """Whether it needs torch at all."""
        return self.binding is not Binding.NONE

    @property
    def line(self) -> str:
        """``torch 2.8``, ``torch 2.9+ (stable ABI)``, or ``torch (minor unknown)``: the line it needs."""
        if self.binding is Binding.STABLE and self.first_line is not None:
            return f"torch {format_version(self.first_line)}+ (stable ABI)"
        if self.minor is None:
            return "torch (minor unknown)" + (" (stable ABI)" if self.binding is Binding.STABLE else "")
        pin = f" (its Requires-Dist: torch{self.requirement})" if self.pinned else ""
        return f"torch {format_version(self.minor)}{pin}"

    @property
    def text(self) -> str:
        """The one description: the line, what binds it there, and what it links (``does not link torch``)."""
        if self.binding is Binding.NONE:
            return "does not link torch"
        binds = f"imports {self.symbol}" if self.symbol else ""  # whole: a renderer demangles and cuts it
        if self.symbol and len(self.symbols) > 1:
            binds += f" (+{len(self.symbols) - 1} more)"
        if self.binding is Binding.STABLE:
            binds = "imports only its C shim" + (f": {self.floor.why}" if self.floor is not None else "")
        links = f"links {' '.join(self.libraries)}" if self.libraries else ""
        return "; ".join(p for p in (self.line, binds, links) if p)

    def serves(self, line: MajorMinor) -> bool | None:
        """Whether a wheel bound so runs with torch ``line`` (``None``: its own line is not known)."""
        if self.binding is Binding.NONE:
            return True
        if self.binding is Binding.STABLE:
            first = self.first_line
            return None if first is None else line[0] == first[0] and line >= first
        if self.minor is None:
            return None
        return line == self.minor

    def why(self) -> str:
        """Why another line is accepted, or what binds it: for verdicts and pull's notes."""
        if self.binding is Binding.NONE:
            return "does not link torch"
        if self.binding is Binding.STABLE:
            if self.floor is not None:
                return f"stable ABI, needs torch >= {format_version(self.floor.line)}: {self.floor.why}"
            since = format_version(self.minor) if self.minor else "its build"
            return f"stable ABI since {since} (links libtorch, imports only its C shim)"
        return (
            f"imports {self.symbol}" if self.symbol else "links torch (its symbols were not recorded: exact)"
        )


def binding_of(binaries: Iterable[BinaryFacts]) -> tuple[Binding, str | None]:
    """How these members bind a wheel to torch, and the symbol that binds it exactly (if read)."""
    members = list(binaries)
    symbol = next((s for b in members for s in b.torch_symbols), None)
    if symbol is not None:
        return Binding.EXACT, symbol
    if any(b.links_torch and not b.torch_symbols_read for b in members):
        return Binding.EXACT, None  # an index entry from before symbols were kept: exact, as it was filed
    return (Binding.STABLE if any(b.links_torch for b in members) else Binding.NONE), None


def needs(wheel: Wheel) -> TorchNeed:
    """From the label, and from the facts where the bytes were read (else: exact, if the label names torch)."""
    claim = wheel.label_claim
    minor = claim.torch if claim else None
    pinned = minor is None and (minor := pinned_line(wheel.requires_torch)) is not None
    cxx11 = claim.cxx11abi if claim else None
    if wheel.facts is None:  # an entry without facts: bound as its label says (older stores count as exact)
        return TorchNeed(minor, Binding.EXACT if minor else Binding.NONE, None, cxx11)
    binaries = wheel.facts.binaries
    binding, symbol = binding_of(binaries)
    symbols = tuple(dict.fromkeys(s for b in binaries for s in b.torch_symbols))
    libraries = tuple(sorted({lib for b in binaries for lib in b.torch_libraries}))
    floor = _floor(binaries, minor) if binding is Binding.STABLE else None
    return TorchNeed(minor, binding, symbol, cxx11, symbols, libraries, floor, wheel.requires_torch, pinned)


# The torch lines a Requires-Dist is tried against: 1.0 to 3.9 (a pin that admits one of them names it).
_LINES = tuple((major, minor) for major in (1, 2, 3) for minor in range(60 if major == 2 else 20))


def pinned_line(requirement: SpecifierSet | None) -> MajorMinor | None:
    """The one torch line ``requirement`` admits (``==2.4.0``, ``>=2.4,<2.5``, ``~=2.4.0``), if exactly one."""
    return None if requirement is None else _pinned(str(requirement))


@functools.lru_cache(maxsize=256)
def _pinned(requirement: str) -> MajorMinor | None:
    spec = SpecifierSet(requirement)
    admitted = [line for line in _LINES if line_admitted(spec, line)]
    return admitted[0] if len(admitted) == 1 else None


def pinned_cuda(requirement: SpecifierSet | None) -> tuple[int, int] | None:
    """The CUDA line a pin's local label names (``==2.4.0+cu121``: 12.1), where it pins one torch build."""
    for spec in requirement or ():
        local = spec.version.partition("+")[2]
        if spec.operator in ("==", "===") and (m := re.fullmatch(r"cu(\d{2,3})(\d)", local)):
            return int(m[1]), int(m[2])
    return None


def line_admitted(requirement: SpecifierSet, line: MajorMinor) -> bool:
    """Whether some release of torch ``line`` (2.10.0, 2.10.1, ...) meets ``requirement``."""
    public = without_local(requirement)
    return any(
        public.contains(Version(f"{line[0]}.{line[1]}.{patch}"), prereleases=True) for patch in range(20)
    )


def without_local(requirement: SpecifierSet) -> SpecifierSet:
    """``requirement`` with its local labels left out (``==2.4.0+cu121`` -> ``==2.4.0``): the torch release
    it asks; the CUDA line a label names is the CUDA demand's (:func:`pinned_cuda`)."""
    if "+" not in str(requirement):
        return requirement
    return SpecifierSet(",".join(f"{s.operator}{s.version.partition('+')[0]}" for s in requirement))


def claims(wheel: Wheel) -> list[str]:
    """Where the label's torch line is one the wheel's own Requires-Dist on torch excludes, or one older
    than the stable-ABI floor its bytes set (a shim function they import is newer than the label's torch:
    it fails to load there with ``undefined symbol: aoti_torch_...``)."""
    claim = wheel.label_claim
    if claim is None or claim.torch is None:
        return []
    line = format_version(claim.torch)
    found = []
    if wheel.requires_torch is not None and not line_admitted(wheel.requires_torch, claim.torch):
        found.append(f"{claim.said_by} says torch {line}, its METADATA requires torch{wheel.requires_torch}")
    needed = _bytes_floor(wheel.facts.binaries if wheel.facts is not None else ())
    if needed is not None and needed[0] > claim.torch:
        since = format_version(needed[0])
        found.append(
            f"{claim.said_by} says torch {line}, its bytes need torch >= {since}: {needed[1]} since {since}"
        )
    return found


def _bytes_floor(binaries: Iterable[BinaryFacts]) -> tuple[MajorMinor, str] | None:
    """The line a stable-ABI build's shim imports need by themselves (no build line to cap it), and the
    function that sets it; ``None`` for a build bound otherwise, imports not read, or none the table lists."""
    members = list(binaries)
    if binding_of(members)[0] is not Binding.STABLE:
        return None
    linking = [b for b in members if b.links_torch]
    if not all(b.shim_symbols_read for b in linking):
        return None
    return newest_import(s for b in linking for s in b.shim_symbols)


def _floor(binaries: Iterable[BinaryFacts], minor: MajorMinor | None) -> Floor | None:
    """A stable build's floor from its members' shim imports; its build line where they were not kept."""
    linking = [b for b in binaries if b.links_torch]
    if not all(b.shim_symbols_read for b in linking):
        if minor is None:
            return None
        why = f"its shim imports were not recorded (reindex --refresh reads them): its build line, {format_version(minor)}"
        return Floor(minor, why, from_bytes=False)
    return stable_floor((s for b in linking for s in b.shim_symbols), minor)


def check(need: TorchNeed, machine: Machine) -> Verdict:
    """Judge the torch demand against the installed (or flagged) torch."""
    torch = machine.torch.value
    has = f"torch {format_version(torch.minor)}" if torch else "no torch"
    if (
        need.requirement is not None
        and torch is not None
        and not _meets(need.requirement, torch.version, torch.minor)
    ):
        why = f"its METADATA requires torch{need.requirement} (pip never checks it: installs are --no-deps)"
        needs = f"{need.text}; requires torch{need.requirement}"
        return Verdict(Demand.TORCH, False, needs, has, why, cause=Cause.TORCH_REQUIREMENT)
    if need.binding is Binding.NONE:
        same = need.minor is None or torch is None or need.minor == torch.minor
        return Verdict(Demand.TORCH, True, need.text, has, "the wheel does not link torch", exact=same)
    if torch is None:
        return unknown(Demand.TORCH, need.text, machine.torch.reason)
    if need.binding is Binding.STABLE:
        return _stable(need, torch.minor, has)
    first = f"undefined symbol: {need.symbols[0]}" if need.symbols else UNDEFINED_TORCH_SYMBOL
    if need.minor is not None and need.minor != torch.minor:
        # The symbol is said once, in what the wheel needs (and the error it predicts), not again here. The
        # two torch lines are said: doctor --env's one line per package shows the reason alone.
        built, here = format_version(need.minor), format_version(torch.minor)
        why = f"built against torch {built}, here {here}: the C++ ABI changes between minor versions" + (
            "" if need.symbol else f" ({need.why()})"
        )
        return Verdict(Demand.TORCH, False, need.text, has, why, first)
    if need.cxx11abi is not None and torch.cxx11abi is not None and need.cxx11abi != torch.cxx11abi:
        reason = f"built with cxx11abi={need.cxx11abi}, torch uses cxx11abi={torch.cxx11abi}"
        return Verdict(
            Demand.TORCH,
            False,
            f"{need.text} cxx11abi={need.cxx11abi}",
            f"{has} cxx11abi={torch.cxx11abi}",
            reason,
            UNDEFINED_TORCH_SYMBOL,
        )
    if torch.exports is not None:
        missing = [s for s in need.symbols if s not in torch.exports]
        if missing:
            reason = f"{len(missing)} of {len(need.symbols)} torch symbols are not exported by {torch}"
            return Verdict(Demand.TORCH, False, need.text, has, reason, f"undefined symbol: {missing[0]}")
        if need.minor is None:
            return Verdict(Demand.TORCH, True, need.text, has, f"all {len(need.symbols)} torch symbols found")
    if need.minor is None:  # the machine's torch is known; it is the wheel's line that is not
        return Verdict(
            Demand.TORCH,
            None,
            need.text,
            has,
            "the wheel's label names no torch version; retag it with --torch",
        )
    return Verdict(Demand.TORCH, True, need.text, has, need.why() if need.symbol else "")


def _meets(requirement: SpecifierSet, version: str, line: MajorMinor) -> bool:
    """Whether the torch ``version`` (``2.9.1+cu128``; a line alone, ``2.9``, for plan's machines) meets it."""
    try:
        exact = Version(version)
    except ValueError:
        return line_admitted(requirement, line)
    if exact.release[2:] or version.count(".") >= 2:
        return without_local(requirement).contains(Version(exact.public), prereleases=True)
    return line_admitted(requirement, line)


def _stable(need: TorchNeed, line: MajorMinor, has: str) -> Verdict:
    serves = need.serves(line)
    if serves is None:
        return Verdict(
            Demand.TORCH,
            None,
            need.text,
            has,
            "stable ABI; its label names no torch line it was built against",
        )
    if serves:
        return Verdict(Demand.TORCH, True, need.text, has, need.why(), exact=need.minor == line)
    first = need.first_line
    assert first is not None
    later = "a later major" if line[0] != first[0] else "an older torch"
    why = f"{need.why()}: {later} than {format_version(first)} lacks the shim functions it calls"
    return Verdict(
        Demand.TORCH, False, need.text, has, why, UNDEFINED_SHIM_SYMBOL, cause=Cause.BELOW_STABLE_FLOOR
    )
