"""The torch demand: the label's torch minor must be the installed one, and its symbols must be exported.

PyTorch has no stable C++ ABI: an extension built against torch 2.8 fails to load under 2.9 with
``undefined symbol: _ZN3c10...``.
"""

from __future__ import annotations

from dataclasses import dataclass

from librarian.coords import MajorMinor, format_version
from librarian.demands.base import Demand, Verdict, Wheel, unknown
from librarian.machine import Machine

UNDEFINED_TORCH_SYMBOL = "undefined symbol: _ZN3c10..."


@dataclass(frozen=True, slots=True)
class TorchNeed:
    """The torch minor the label names (if any), its C++ ABI claim, and the torch symbols the bytes need."""

    minor: MajorMinor | None
    cxx11abi: bool | None = None
    symbols: tuple[str, ...] = ()
    links: bool = False  # links libtorch / libc10

    @property
    def text(self) -> str:
        """``torch 2.8``, or ``torch (minor unknown)``."""
        return f"torch {format_version(self.minor)}" if self.minor else "torch (minor unknown)"


def needs(wheel: Wheel) -> TorchNeed:
    """From the label, and from the facts where the bytes were read."""
    claim = wheel.name.label_claim
    binaries = wheel.facts.binaries if wheel.facts else ()
    symbols = tuple(dict.fromkeys(s for b in binaries for s in b.torch_symbols))
    links = bool(symbols) or any(b.links_torch for b in binaries)
    return TorchNeed(claim.torch if claim else None, claim.cxx11abi if claim else None, symbols, links)


def check(need: TorchNeed, machine: Machine) -> Verdict:
    """Judge the torch demand against the installed (or flagged) torch."""
    torch = machine.torch.value
    if need.minor is None and not need.links:
        has = f"torch {format_version(torch.minor)}" if torch else "no torch"
        return Verdict(Demand.TORCH, True, "no torch", has, "the wheel does not link torch")
    if torch is None:
        return unknown(Demand.TORCH, need.text, machine.torch.reason)
    has = f"torch {format_version(torch.minor)}"
    first = f"undefined symbol: {need.symbols[0]}" if need.symbols else UNDEFINED_TORCH_SYMBOL
    if need.minor is not None and need.minor != torch.minor:
        return Verdict(Demand.TORCH, False, need.text, has, "torch's C++ ABI changes between minor versions", first)
    if need.cxx11abi is not None and torch.cxx11abi is not None and need.cxx11abi != torch.cxx11abi:
        reason = f"built with cxx11abi={need.cxx11abi}, torch uses cxx11abi={torch.cxx11abi}"
        return Verdict(Demand.TORCH, False, f"{need.text} cxx11abi={need.cxx11abi}",
                       f"{has} cxx11abi={torch.cxx11abi}", reason, UNDEFINED_TORCH_SYMBOL)  # fmt: skip
    if torch.exports is not None:
        missing = [s for s in need.symbols if s not in torch.exports]
        if missing:
            reason = f"{len(missing)} of {len(need.symbols)} torch symbols are not exported by {torch}"
            return Verdict(Demand.TORCH, False, need.text, has, reason, f"undefined symbol: {missing[0]}")
        if need.minor is None:
            return Verdict(Demand.TORCH, True, need.text, has, f"all {len(need.symbols)} torch symbols found")
    if need.minor is None:  # the machine's torch is known; it is the wheel's line that is not
        return Verdict(Demand.TORCH, None, need.text, has, "the wheel's label names no torch version; retag it with --torch")
    return Verdict(Demand.TORCH, True, need.text, has)
