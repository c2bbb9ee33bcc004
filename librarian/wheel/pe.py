"""A pure, bounded reader of Windows PE files (``.pyd`` / ``.dll``): sections, imported DLLs and symbols
(from the import table and the delay-load import table alike).

What librarian needs of a Windows member, as of an ELF one: where device code sits (nvcc's fatbinaries in a
section PE names ``.nv_fatb``, its 8-byte cut of ``.nv_fatbin``; ``__nv_rel`` for ``__nv_relfatbin``;
libraries like cuFFT keep fatbins as data in ``.data``), which DLLs it imports (``cudart64_12.dll`` says CUDA
12, ``torch_cpu.dll`` and ``c10.dll`` that it links torch) and the symbols it imports from them (MSVC-mangled
C++ torch symbols, ``?...@c10@@...``, bind it to one torch line). Layout: the Microsoft PE/COFF
specification (https://learn.microsoft.com/windows/win32/debug/pe-format). Every count and offset is
checked against the file, so a crafted file raises BadBinary in one line, and the work of one file is bounded
as a whole, not only per field: descriptors that share one lookup table have it read once, and every lookup
entry (ordinals too) and every byte of imported names counts against one budget per file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from librarian.errors import BadBinary
from librarian.wheel.elf import Source

MAX_SECTIONS = 96  # the loader's own limit
MAX_IMPORT_DLLS = 4096
MAX_IMPORTED = 1 << 18  # imported symbols over all DLLs
MAX_NAME = 1024
# The work of one file's import tables: lookup entries read (by name or by ordinal) and bytes of names read.
# A real extension imports a few thousand symbols (torch_python's .pyd: about 9,000); these are far above.
MAX_LOOKUP_ENTRIES = 1 << 20
MAX_NAME_BYTES = 32 << 20
_LOOKUP_CHUNK = 512  # entries read at once
SCN_CODE, SCN_INITIALIZED_DATA, SCN_EXECUTE = 0x20, 0x40, 0x20000000
# COFF machine -> librarian's one CPU vocabulary (data/platforms.toml [cpu]: win_arm64's arm64 is aarch64),
# so that nothing downstream translates
CPUS = {0x8664: "x86_64", 0x14C: "i686", 0xAA64: "aarch64"}


def sniff(src: Source, head: bytes) -> str | None | bool:
    """The CPU of a PE file (``None``: a machine it does not name), or ``False``: no PE file."""
    if head[:2] != b"MZ" or len(head) < 0x40:
        return False
    (pe_off,) = struct.unpack_from("<I", head, 0x3C)
    sig, machine = struct.unpack("<4sH", src.read(pe_off, 6, "PE header"))
    if sig != b"PE\0\0":
        raise BadBinary("MZ file without a PE header")
    return CPUS.get(machine)


@dataclass(frozen=True, slots=True)
class PeSection:
    """One section header: its (8-byte) name, where it is loaded and where its bytes are in the file."""

    name: str
    virtual_address: int
    virtual_size: int
    offset: int
    raw_size: int
    characteristics: int

    @property
    def size(self) -> int:
        """Its bytes in the file, without the padding to the file alignment (a virtual size of 0: all of them)."""
        return min(self.virtual_size, self.raw_size) if self.virtual_size else self.raw_size

    @property
    def holds_data(self) -> bool:
        """Initialized data that is not code: where a library may keep fatbins it loads itself."""
        return bool(self.characteristics & SCN_INITIALIZED_DATA) and not self.characteristics & (
            SCN_CODE | SCN_EXECUTE
        )


@dataclass(frozen=True, slots=True)
class PeFile:
    """What librarian reads of a PE file."""

    cpu: str | None
    sections: tuple[PeSection, ...]
    dlls: tuple[str, ...]  # imported DLLs, in the import table's order
    imported: tuple[str, ...]  # symbols imported by name, from every DLL


def read_pe(data: BinaryIO | bytes) -> PeFile:
    """Parse a PE file's headers, sections and import table; BadBinary on anything out of bounds."""
    src = Source(data)
    if src.read(0, 2, "DOS header") != b"MZ":
        raise BadBinary("not a PE file (no MZ header)")
    (pe_off,) = struct.unpack("<I", src.read(0x3C, 4, "DOS header"))
    sig, machine, nsections, _, _, _, opt_size, _ = struct.unpack(
        "<4sHHIIIHH", src.read(pe_off, 24, "PE header")
    )
    if sig != b"PE\0\0":
        raise BadBinary("MZ file without a PE header")
    if nsections > MAX_SECTIONS:
        raise BadBinary(f"{nsections} sections, more than a PE file may have ({MAX_SECTIONS})")
    opt = pe_off + 24
    magic = struct.unpack("<H", src.read(opt, 2, "optional header"))[0] if opt_size >= 2 else 0
    if magic not in (0x10B, 0x20B):
        raise BadBinary(f"optional header magic {magic:#x} is neither PE32 nor PE32+")
    plus = magic == 0x20B
    sections = tuple(_sections(src, opt + opt_size, nsections))
    # Data directory 1 is the import table: at 0x70 (PE32+) or 0x60 (PE32) into the optional header.
    # Data directories: 1 the import table, 13 the delay-load import table (8 bytes each), from 0x70 (PE32+)
    # or 0x60 (PE32) into the optional header.
    directories = opt + (0x70 if plus else 0x60)
    count = max(0, (opt_size - (0x70 if plus else 0x60)) // 8)
    reader = _ImportReader(src, sections, plus)
    if count > 1:
        rva, _ = struct.unpack("<II", src.read(directories + 8, 8, "import directory entry"))
        if rva:
            reader.table(rva, delayed=False)
    if count > 13:
        rva, _ = struct.unpack("<II", src.read(directories + 8 * 13, 8, "delay-load import directory entry"))
        if rva:
            reader.table(rva, delayed=True)
    dlls, imported = tuple(reader.dlls), tuple(reader.imported)
    return PeFile(CPUS.get(machine), sections, dlls, imported)


def _sections(src: Source, at: int, count: int) -> Iterator[PeSection]:
    for i in range(count):
        raw = src.read(at + 40 * i, 40, "section header")
        name, vsize, va, rsize, roff = struct.unpack_from("<8sIIII", raw)
        (chars,) = struct.unpack_from("<I", raw, 36)
        if rsize and roff + rsize > src.size:
            raise BadBinary(
                f"section {name.rstrip(bytes(1)).decode('latin-1')!r} runs past the end of the file"
            )
        yield PeSection(name.rstrip(b"\0").decode("latin-1"), va, vsize, roff, rsize, chars)


def _offset(sections: tuple[PeSection, ...], rva: int, what: str) -> int:
    """The file offset of a relative virtual address, through the section that holds it."""
    for s in sections:
        if s.virtual_address <= rva < s.virtual_address + max(s.virtual_size, s.raw_size):
            delta = rva - s.virtual_address
            if delta >= s.raw_size:
                raise BadBinary(f"{what} at RVA {rva:#x} lies in {s.name}'s zero-filled tail")
            return s.offset + delta
    raise BadBinary(f"{what} at RVA {rva:#x} is in no section")


def _string(src: Source, sections: tuple[PeSection, ...], rva: int, what: str) -> str:
    at = _offset(sections, rva, what)
    raw = src.read(at, min(MAX_NAME, src.size - at), what)
    end = raw.find(b"\0")
    if end < 0:
        raise BadBinary(f"{what} at RVA {rva:#x} is not terminated within {MAX_NAME} bytes")
    return raw[:end].decode("latin-1")


class _ImportReader:
    """The import tables of one file, read within one budget (see the module's docstring)."""

    def __init__(self, src: Source, sections: tuple[PeSection, ...], plus: bool) -> None:
        self.src, self.sections, self.plus = src, sections, plus
        self.step, self.ordinal_flag = (8, 1 << 63) if plus else (4, 1 << 31)
        self.dlls: list[str] = []
        self.imported: list[str] = []
        self.entries = 0  # lookup entries read, over all tables
        self.name_bytes = 0  # bytes of imported names read, over all tables
        self.lookups: dict[int, list[str]] = {}  # a lookup table's names, by its RVA: read once
        self.names: dict[int, str] = {}  # an imported name by its RVA: read once

    def table(self, rva: int, *, delayed: bool) -> None:
        """Read an import table (20-byte descriptors) or a delay-load one (32-byte descriptors)."""
        at = _offset(self.sections, rva, "delay-load import table" if delayed else "import table")
        size = 32 if delayed else 20
        for i in range(MAX_IMPORT_DLLS + 1):
            raw = self.src.read(at + size * i, size, "import descriptor")
            if delayed:  # attributes, DLL name, module handle, IAT, name table, bound IAT, unload IAT, stamp
                attributes, name_rva, lookup = struct.unpack_from("<II8xI", raw)
                thunks = 0
                if any(raw) and not attributes & 1:
                    continue  # Visual C++ 6's form holds addresses, not RVAs: no toolchain of CUDA's writes it
            else:  # lookup table, stamp, forwarder chain, DLL name, address table
                lookup, _, _, name_rva, thunks = struct.unpack("<IIIII", raw)
            if not any(raw):
                return  # the all-zero descriptor ends the table
            if len(self.dlls) >= MAX_IMPORT_DLLS:
                raise BadBinary(f"more than {MAX_IMPORT_DLLS} imported DLLs")
            self.dlls.append(self.name(name_rva, "imported DLL name"))
            if lookup or thunks:
                self.imported += self.lookup(lookup or thunks)
            if len(self.imported) > MAX_IMPORTED:
                raise BadBinary(f"more than {MAX_IMPORTED} imported symbols")
        raise BadBinary(f"more than {MAX_IMPORT_DLLS} imported DLLs")

    def lookup(self, rva: int) -> list[str]:
        """The names a lookup table imports (ordinals read, not kept); a table shared by descriptors once."""
        known = self.lookups.get(rva)
        if known is not None:
            return known
        at = _offset(self.sections, rva, "import lookup table")
        names: list[str] = []
        fmt = "<Q" if self.plus else "<I"
        while True:
            chunk = min(_LOOKUP_CHUNK, (self.src.size - at) // self.step)
            if chunk <= 0:
                raise BadBinary(f"import lookup table at RVA {rva:#x} runs past the end of the file")
            raw = self.src.read(at, chunk * self.step, "import lookup entries")
            for (entry,) in struct.iter_unpack(fmt, raw):
                if entry == 0:
                    self.lookups[rva] = names
                    return names
                self.entries += 1
                if self.entries > MAX_LOOKUP_ENTRIES:
                    raise BadBinary(f"more than {MAX_LOOKUP_ENTRIES} import lookup entries")
                if not entry & self.ordinal_flag:  # by name: a 2-byte hint, then the name
                    names.append(self.name((entry & 0x7FFFFFFF) + 2, "imported symbol name"))
            at += len(raw)

    def name(self, rva: int, what: str) -> str:
        known = self.names.get(rva)
        if known is None:
            known = self.names[rva] = _string(self.src, self.sections, rva, what)
            self.name_bytes += len(known) + 1
            if self.name_bytes > MAX_NAME_BYTES:
                raise BadBinary(f"more than {MAX_NAME_BYTES >> 20} MiB of imported names")
        return known
