"""Mach-O files built by hand as bytes: thin 64-bit ones with LC_LOAD_DYLIB and LC_SYMTAB, and universal2.

Enough of ``<mach-o/loader.h>`` for librarian's reader and macholib, its oracle in the tests.
"""

from __future__ import annotations

import struct

CPU_X86_64, CPU_ARM64 = 0x01000007, 0x0100000C


def thin(
    cpu: int = CPU_ARM64,
    dylibs: tuple[str, ...] = (),
    undefined: tuple[str, ...] = (),
    defined: tuple[str, ...] = (),
) -> bytes:
    """An MH_BUNDLE (a Python extension's kind) loading ``dylibs`` and importing ``undefined`` (C/C++ names:
    the leading underscore Mach-O adds is added here)."""
    commands = bytearray()
    for lib in dylibs:
        name = lib.encode() + b"\0"
        size = 24 + len(name) + (-(24 + len(name)) % 8)
        commands += (
            struct.pack("<IIIIII", 0xC, size, 24, 2, 0x10000, 0x10000) + name + bytes(size - 24 - len(name))
        )
    ncmds = len(dylibs) + 1
    header_size = 32
    symtab_at = header_size + len(commands)
    commands_size = len(commands) + 24
    strings = bytearray(b"\0")
    rows = bytearray()
    for name, ntype in [
        *((n, 0x01) for n in undefined),
        *((n, 0x0F) for n in defined),
    ]:  # N_UNDF|N_EXT; N_SECT|N_EXT
        rows += struct.pack("<IBBHQ", len(strings), ntype, 0 if ntype == 0x01 else 1, 0, 0)
        strings += b"_" + name.encode() + b"\0"
    symoff = header_size + commands_size
    stroff = symoff + len(rows)
    count = len(undefined) + len(defined)
    commands += struct.pack("<IIIIII", LC_SYMTAB := 0x2, 24, symoff, count, stroff, len(strings))
    assert len(commands) == commands_size and symtab_at >= header_size and LC_SYMTAB
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, cpu, 0, 8, ncmds, commands_size, 0, 0)
    return header + bytes(commands) + bytes(rows) + bytes(strings)


def universal(*slices: tuple[int, bytes]) -> bytes:
    """A fat file of (cputype, thin bytes) slices, each 4 KiB aligned."""
    head = struct.pack(">II", 0xCAFEBABE, len(slices))
    at = 4096
    rows, body = bytearray(), bytearray()
    for cpu, data in slices:
        rows += struct.pack(">IIIII", cpu, 0, at, len(data), 12)
        padded = data + bytes(-len(data) % 4096)
        body += padded
        at += len(padded)
    out = head + rows
    return bytes(out + bytes(4096 - len(out)) + body)
