"""A pure, bounded reader of Mach-O files (macOS ``.so`` / ``.dylib``, thin or universal2): imports and symbols.

macOS has no CUDA, so a Mach-O member carries no device code librarian could serve; what matters is what
it links (``@rpath/libtorch_cpu.dylib``, ``libc10.dylib``) and the symbols it imports from them: a mangled
C++ torch symbol (``__ZN3c10...``: Mach-O puts one more underscore before the C++ name) binds it to one
torch line. Layout: Apple's ``<mach-o/loader.h>``, ``<mach-o/fat.h>`` and ``<mach-o/nlist.h>``. Every
count and offset is checked against the file, so a crafted file raises BadBinary in one line.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from librarian.errors import BadBinary
from librarian.wheel.elf import Source

MAX_COMMANDS = 4096
MAX_SLICES = 16
MAX_SYMBOLS = 1 << 20
MAX_STRINGS = 64 << 20
MAX_NAME = 1 << 16  # one symbol's name (a long mangled C++ name is a few KB)
# Bytes of undefined symbols' names one file may yield in all: names that all point into one long string
# table are each read only up to their NUL, and never more than this over the file.
MAX_NAME_BYTES = 64 << 20
LC_SYMTAB = 0x2
LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LAZY_LOAD_DYLIB = 0xC, 0x80000018, 0x8000001F, 0x20
_DYLIBS = (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LAZY_LOAD_DYLIB)
N_TYPE, N_EXT, N_UNDF = 0x0E, 0x01, 0x0
THIN = {b"\xcf\xfa\xed\xfe": True, b"\xce\xfa\xed\xfe": False}  # little-endian magic -> 64-bit
FAT, FAT_64 = b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf"
# cputype -> librarian's one CPU vocabulary (data/platforms.toml [cpu]: macosx_11_0_arm64's arm64 is aarch64),
# so that nothing downstream translates
CPUS = {0x01000007: "x86_64", 7: "i686", 0x0100000C: "aarch64", 12: "armv7l"}


def sniff(src: Source, head: bytes) -> str | None | bool:
    """The CPU of a Mach-O file (``universal2`` for x86_64 and arm64 in one; ``None``: a cputype it does
    not name), or ``False``: no Mach-O file."""
    magic = head[:4]
    if magic in THIN and len(head) >= 8:
        return CPUS.get(struct.unpack_from("<I", head, 4)[0])
    if magic == FAT and len(head) >= 8:
        count = struct.unpack_from(">I", head, 4)[0]
        if not 0 < count < MAX_SLICES:  # a larger count is a Java class file, which shares this magic
            return False
        rows = src.read(8, 20 * count, "Mach-O fat header")
        cpus = {CPUS.get(struct.unpack_from(">I", rows, 20 * i)[0]) for i in range(count)}
        if cpus == {"x86_64", "aarch64"}:
            return "universal2"
        return next(iter(sorted(c for c in cpus if c)), None)
    return False


@dataclass(frozen=True, slots=True)
class MachOFile:
    """What librarian reads of a Mach-O file: over every slice of a universal one."""

    cpus: tuple[str, ...]
    dylibs: tuple[str, ...]  # the libraries it loads, by install name (``@rpath/libtorch_cpu.dylib``)
    imported: tuple[str, ...]  # undefined external symbols, as the C/C++ name (one leading underscore off)


def read_macho(data: BinaryIO | bytes) -> MachOFile:
    """Parse a thin or universal Mach-O file's load commands and undefined symbols."""
    src = Source(data)
    magic = src.read(0, 4, "Mach-O header")
    if magic in THIN:
        slices = [(0, src.size)]
    elif magic in (FAT, FAT_64):
        (count,) = struct.unpack(">I", src.read(4, 4, "fat header"))
        if not 0 < count <= MAX_SLICES:
            raise BadBinary(f"universal file with {count} slices")
        size = 32 if magic == FAT_64 else 20
        slices = []
        for i in range(count):
            row = src.read(8 + size * i, size, "fat arch")
            offset, length = struct.unpack_from(">QQ" if magic == FAT_64 else ">II", row, 8)
            if offset + length > src.size:
                raise BadBinary(f"slice {i} at {offset:#x} + {length:#x} runs past the end of the file")
            slices.append((offset, length))
    else:
        raise BadBinary("not a Mach-O file")
    cpus: list[str] = []
    dylibs: dict[str, None] = {}
    imported: dict[str, None] = {}
    for offset, length in slices:
        cpu, libs, symbols = _slice(src, offset, length)
        cpus.append(cpu)
        dylibs.update(dict.fromkeys(libs))
        imported.update(dict.fromkeys(symbols))
    return MachOFile(tuple(cpus), tuple(dylibs), tuple(imported))


def _slice(src: Source, base: int, length: int) -> tuple[str, list[str], list[str]]:
    magic = src.read(base, 4, "Mach-O header")
    if magic not in THIN:
        raise BadBinary(f"slice at {base:#x} is no little-endian Mach-O file")
    wide = THIN[magic]
    cputype, _, _, ncmds, sizeofcmds = struct.unpack("<iIIII", src.read(base + 4, 20, "Mach-O header"))
    if ncmds > MAX_COMMANDS or sizeofcmds > length:
        raise BadBinary(f"{ncmds} load commands in {sizeofcmds} bytes do not fit the file")
    at = base + (32 if wide else 28)
    end = at + sizeofcmds
    dylibs: list[str] = []
    symbols: list[str] = []
    for _ in range(ncmds):
        cmd, size = struct.unpack("<II", src.read(at, 8, "load command"))
        if size < 8 or at + size > end:
            raise BadBinary(f"load command {cmd:#x} at {at:#x} of size {size} runs past the commands")
        body = src.read(at, size, "load command")
        if cmd in _DYLIBS and size >= 24:
            (name_at,) = struct.unpack_from("<I", body, 8)
            name = body[name_at:].split(b"\0", 1)[0] if name_at < size else b""
            dylibs.append(name.decode("utf-8", "replace"))  # the install name whole: @rpath/libc10.dylib
        elif cmd == LC_SYMTAB and size >= 24:
            symoff, nsyms, stroff, strsize = struct.unpack_from("<IIII", body, 8)
            symbols += _undefined(src, base, length, wide, symoff, nsyms, stroff, strsize)
        at += size
    return CPUS.get(cputype, f"cpu {cputype:#x}"), dylibs, symbols


def _undefined(
    src: Source, base: int, length: int, wide: bool, symoff: int, nsyms: int, stroff: int, strsize: int
) -> list[str]:
    if nsyms > MAX_SYMBOLS or strsize > MAX_STRINGS:
        raise BadBinary(f"a symbol table of {nsyms} symbols and {strsize} bytes of names")
    step = 16 if wide else 12
    if symoff + nsyms * step > length or stroff + strsize > length:
        raise BadBinary("the symbol table runs past the end of its slice")
    table = src.read(base + symoff, nsyms * step, "symbol table")
    strings = src.read(base + stroff, strsize, "string table")
    found: dict[int, str] = {}  # by string-table index: symbols that share a name cost it once
    total = 0
    for i in range(nsyms):
        strx, ntype = struct.unpack_from("<IB", table, i * step)
        if ntype & N_TYPE == N_UNDF and ntype & N_EXT and 0 < strx < strsize and strx not in found:
            end = strings.find(b"\0", strx, strx + MAX_NAME + 1)  # no copy of the table's tail
            if end < 0 and strsize - strx <= MAX_NAME:
                end = strsize  # the table's last name, its NUL cut off: what it holds is the name
            if end < 0:
                raise BadBinary(f"symbol name at string {strx} is not terminated within {MAX_NAME} bytes")
            total += end - strx
            if total > MAX_NAME_BYTES:
                raise BadBinary(f"more than {MAX_NAME_BYTES >> 20} MiB of imported symbol names")
            # the C name: Mach-O adds one underscore
            found[strx] = strings[strx:end].decode("utf-8", "replace").removeprefix("_")
    return list(found.values())
