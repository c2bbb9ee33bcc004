"""A pure, bounded reader of Windows PE files (``.pyd`` / ``.dll``): sections, imported DLLs and symbols.

What librarian needs of a Windows member, as of an ELF one: where device code sits (nvcc's fatbinaries in a
section PE names ``.nv_fatb``, its 8-byte cut of ``.nv_fatbin``; ``__nv_rel`` for ``__nv_relfatbin``;
libraries like cuFFT keep fatbins as data in ``.data``), which DLLs it imports (``cudart64_12.dll`` says CUDA
12, ``torch_cpu.dll`` and ``c10.dll`` that it links torch) and the symbols it imports from them (MSVC-mangled
C++ torch symbols, ``?...@c10@@...``, bind it to one torch line). Layout: the Microsoft PE/COFF
specification (https://learn.microsoft.com/windows/win32/debug/pe-format). Every count and offset is
checked against the file, so a crafted file raises BadBinary in one line.
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
SCN_CODE, SCN_INITIALIZED_DATA, SCN_EXECUTE = 0x20, 0x40, 0x20000000
_MACHINES = {0x8664: "x86_64", 0x14C: "i686", 0xAA64: "arm64"}


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
    dir_at = opt + (0x70 if plus else 0x60)
    imports_rva = 0
    if opt_size >= (0x70 if plus else 0x60) + 16:
        imports_rva, _ = struct.unpack("<II", src.read(dir_at + 8, 8, "import directory entry"))
    dlls, imported = _imports(src, sections, imports_rva, plus) if imports_rva else ((), ())
    return PeFile(_MACHINES.get(machine), sections, dlls, imported)


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


def _imports(
    src: Source, sections: tuple[PeSection, ...], rva: int, plus: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    at = _offset(sections, rva, "import table")
    dlls: list[str] = []
    imported: list[str] = []
    step, ordinal_flag = (8, 1 << 63) if plus else (4, 1 << 31)
    for i in range(MAX_IMPORT_DLLS + 1):
        lookup, _, _, name_rva, thunks = struct.unpack(
            "<IIIII", src.read(at + 20 * i, 20, "import descriptor")
        )
        if not (lookup or name_rva or thunks):
            break  # the all-zero descriptor ends the table
        if i == MAX_IMPORT_DLLS:
            raise BadBinary(f"more than {MAX_IMPORT_DLLS} imported DLLs")
        dlls.append(_string(src, sections, name_rva, "imported DLL name"))
        table = _offset(sections, lookup or thunks, "import lookup table")
        for j in range(MAX_IMPORTED):
            (entry,) = struct.unpack(
                "<Q" if plus else "<I", src.read(table + step * j, step, "import lookup entry")
            )
            if entry == 0:
                break
            if not entry & ordinal_flag:  # by name: a 2-byte hint, then the name
                imported.append(_string(src, sections, (entry & 0x7FFFFFFF) + 2, "imported symbol name"))
            if len(imported) > MAX_IMPORTED:
                raise BadBinary(f"more than {MAX_IMPORTED} imported symbols")
    return tuple(dlls), tuple(imported)
