"""Which native binary a member is: ELF, PE or Mach-O, and for which CPU, from its first bytes."""

from __future__ import annotations

import struct
from typing import BinaryIO

from librarian.errors import BadBinary
from librarian.facts import BinaryFormat
from librarian.wheel.elf import ELF_MAGIC, Source, read_elf

# PE (COFF machine) and Mach-O (cputype) -> the CPU name platform tags use.
_PE_MACHINES = {0x8664: "x86_64", 0x14C: "i686", 0xAA64: "arm64"}  # as win_amd64/win32/win_arm64 name them
_MACHO_CPUS = {0x01000007: "x86_64", 7: "i686", 0x0100000C: "arm64", 12: "arm"}


def identify(data: BinaryIO | bytes) -> tuple[BinaryFormat, str | None]:
    """The container format and CPU of a native binary, from its magic and machine field."""
    src = Source(data)
    head = src.read(0, min(src.size, 64), "file header")
    if head[:4] == ELF_MAGIC:
        return BinaryFormat.ELF, read_elf(data).cpu
    if head[:2] == b"MZ" and len(head) >= 0x40:
        (pe_off,) = struct.unpack_from("<I", head, 0x3C)
        sig, machine = struct.unpack("<4sH", src.read(pe_off, 6, "PE header"))
        if sig != b"PE\0\0":
            raise BadBinary("MZ file without a PE header")
        return BinaryFormat.PE, _PE_MACHINES.get(machine)
    magic = head[:4]
    if magic in (b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe") and len(head) >= 8:
        return BinaryFormat.MACHO, _MACHO_CPUS.get(struct.unpack_from("<I", head, 4)[0])
    if magic == b"\xca\xfe\xba\xbe" and len(head) >= 8:
        count = struct.unpack_from(">I", head, 4)[0]
        if 0 < count < 16:  # a larger count is a Java class file, which shares this magic
            rows = src.read(8, 20 * count, "Mach-O fat header")
            cpus = {_MACHO_CPUS.get(struct.unpack_from(">I", rows, 20 * i)[0]) for i in range(count)}
            if cpus == {"x86_64", "arm64"}:
                return BinaryFormat.MACHO, "universal2"
            return BinaryFormat.MACHO, next(iter(sorted(c for c in cpus if c)), None)
    return BinaryFormat.UNKNOWN, None
