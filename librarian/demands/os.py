"""The OS demand: every native member must be in the binary format this OS loads (ELF, PE, Mach-O)."""

from __future__ import annotations

from dataclasses import dataclass

from librarian.demands.base import Demand, Verdict, Wheel, unknown
from librarian.facts import BinaryFormat
from librarian.machine import Machine
from librarian.platforms import FormatWords, format_words, os_format, parse_platform


def _words(fmt: BinaryFormat) -> FormatWords:
    words = format_words(fmt)
    assert words is not None  # OsNeed holds host-native formats only
    return words


def no_cuda(wheel: Wheel) -> str | None:
    """Why no machine runs this wheel's CUDA code at all: its native members are all for an OS without a
    CUDA driver (macOS); ``None`` otherwise."""
    hosts = [b for b in wheel.facts.binaries if b.format.is_host] if wheel.facts is not None else []
    formats = {b.format for b in hosts}
    if hosts and all(not _words(f).cuda for f in formats):
        words = [_words(f) for f in sorted(formats, key=lambda f: f.value)]
        what = ", ".join(f"{w.label} ({w.os})" for w in words)
        oses = " and ".join(dict.fromkeys(w.os for w in words))
        return f"its binaries are {what}, and {oses} has no CUDA"
    return None


@dataclass(frozen=True, slots=True)
class OsNeed:
    """The binary formats of a wheel's host-native members: (path, format) pairs."""

    members: tuple[tuple[str, BinaryFormat], ...]

    @property
    def formats(self) -> tuple[BinaryFormat, ...]:
        """The distinct formats, sorted by name."""
        return tuple(sorted({f for _, f in self.members}, key=lambda f: f.value))

    @property
    def text(self) -> str:
        """``linux (elf)``: the OS each format is for, as the table of formats names it; ``any OS``."""
        return ", ".join(_words(f).name for f in self.formats) or "any OS"


def platform_format(platform: str) -> BinaryFormat | None:
    """The binary format a platform tag's OS loads: ``manylinux_2_28_x86_64`` -> ELF; ``any`` -> None."""
    return parse_platform(platform).format


def needs(wheel: Wheel) -> OsNeed:
    """From the native members' bytes, else from the platform tags."""
    if wheel.facts is not None:
        found = tuple((b.path, b.format) for b in wheel.facts.binaries if b.format.is_host)
        return OsNeed(found)
    formats = {platform_format(p) for p in wheel.name.platform_tag.split(".")}
    return OsNeed(
        tuple(("(its platform tag)", f) for f in sorted((f for f in formats if f), key=lambda f: f.value))
    )


def check(need: OsNeed, machine: Machine) -> Verdict:
    """Judge the OS demand against the machine's OS."""
    if not need.members:
        return Verdict(Demand.OS, True, need.text, machine.os.value or "unknown", "no native code")
    text = need.text
    if machine.os.value is None:
        return unknown(Demand.OS, text, machine.os.reason)
    known = os_format(machine.os.value)
    native = known or BinaryFormat.ELF  # other unixes load ELF
    # One word per OS, the wheel's and the machine's alike: "windows (pe)", never "win32 (pe)" beside it.
    has = _words(native).name if known is not None else f"{machine.os.value} ({native.value})"
    wrong = [(path, f) for path, f in need.members if f is not native]
    if not wrong:
        return Verdict(Demand.OS, True, text, has)
    return Verdict(
        Demand.OS, False, text, has, f"{wrong[0][0]} is {wrong[0][1].value}", _words(native).loader_error
    )


def claims(wheel: Wheel) -> list[str]:
    """Where a platform tag names another OS than a native member's format, or ``any`` carries native code."""
    if wheel.facts is None:
        return []
    problems = []
    host = [b for b in wheel.facts.binaries if b.format.is_host]
    for plat in wheel.name.platform_tag.split("."):
        if plat == "any":
            problems += [f"platform any, but {b.path} is a native binary" for b in host]
            continue
        want = platform_format(plat)
        problems += [
            f"platform {plat}, but {b.path} is {_words(b.format).a} binary"
            for b in host
            if want is not None and b.format is not want
        ]
    return problems
