"""Windows PE32+ DLLs built by hand as bytes, like the ELF fixtures: sections and an import table.

Enough of the PE/COFF layout for librarian's reader (and pefile, its oracle in the tests): a DOS header, the
COFF header, a PE32+ optional header whose data directory 1 points at an ``.idata`` section, the section
table, and each section's bytes at a 0x200-aligned file offset (0x1000-aligned in memory).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

FILE_ALIGN, SECTION_ALIGN = 0x200, 0x1000
DATA, CODE = 0xC0000040, 0x60000020  # initialized data, read/write; code, execute/read
READ_ONLY_DATA = 0x40000040


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _idata(va: int, imports: dict[str, list[str]], delayed: bool = False) -> bytes:
    """The import directory (or, ``delayed``, the delay-load one), lookup tables, hint/name entries and DLL
    names, laid out from ``va``."""
    dlls = list(imports)
    size = 32 if delayed else 20
    descriptors = size * (len(dlls) + 1)
    tables_at = descriptors
    tables_size = sum(8 * (len(imports[d]) + 1) for d in dlls)
    names_at = tables_at + tables_size
    names = bytearray()
    name_rva: dict[tuple[str, str], int] = {}
    for dll in dlls:
        for sym in imports[dll]:
            name_rva[(dll, sym)] = va + names_at + len(names)
            names += struct.pack("<H", 0) + sym.encode() + b"\0"
            names += bytes(len(names) % 2)
    dll_at = names_at + len(names)
    dll_names = bytearray()
    dll_rva = {}
    for dll in dlls:
        dll_rva[dll] = va + dll_at + len(dll_names)
        dll_names += dll.encode() + b"\0"
    out = bytearray()
    table_rva = va + tables_at
    for dll in dlls:
        if delayed:  # attributes (1: RVAs), DLL name, module handle, IAT, name table, bound, unload, stamp
            out += struct.pack("<8I", 1, dll_rva[dll], 0, 0, table_rva, 0, 0, 0)
        else:
            out += struct.pack("<IIIII", table_rva, 0, 0, dll_rva[dll], table_rva)
        table_rva += 8 * (len(imports[dll]) + 1)
    out += bytes(size)
    for dll in dlls:
        for sym in imports[dll]:
            out += struct.pack("<Q", name_rva[(dll, sym)])
        out += bytes(8)
    return bytes(out + names + dll_names)


def pe_dll(
    sections: tuple[tuple[str, bytes, int], ...] = (),
    imports: dict[str, list[str]] | None = None,
    machine: int = 0x8664,
    *,
    delay_imports: dict[str, list[str]] | None = None,
    idata: Callable[[int], bytes] | None = None,
) -> bytes:
    """A PE32+ DLL with ``sections`` (name, bytes, characteristics) and an import table of ``imports``
    (DLL -> symbols imported by name), a delay-load import table of ``delay_imports``, or an ``.idata``
    section of hand-laid bytes (``idata(va)``, the section's address in) that directory 1 points at."""
    table = list(sections)
    idata_index = didat_index = None
    if imports or idata:
        idata_index = len(table)
        table.append((".idata", b"", READ_ONLY_DATA))
    if delay_imports:
        didat_index = len(table)
        table.append((".didat", b"", READ_ONLY_DATA))
    count = len(table)
    opt_size = 240
    headers = _align(0x40 + 4 + 20 + opt_size + 40 * count, FILE_ALIGN)
    vas = [SECTION_ALIGN * (i + 1) for i in range(count)]
    if idata_index is not None:
        laid = idata(vas[idata_index]) if idata else _idata(vas[idata_index], imports or {})
        table[idata_index] = (".idata", laid, READ_ONLY_DATA)
    if didat_index is not None:
        assert delay_imports is not None
        table[didat_index] = (".didat", _idata(vas[didat_index], delay_imports, True), READ_ONLY_DATA)
    raw_at, offsets = headers, []
    for _, data, _ in table:
        offsets.append(raw_at)
        raw_at += _align(len(data), FILE_ALIGN)
    dos = b"MZ" + bytes(0x3A) + struct.pack("<I", 0x40)
    coff = struct.pack("<HHIIIHH", machine, count, 0, 0, 0, opt_size, 0x2022)
    opt = bytearray(opt_size)
    struct.pack_into("<H", opt, 0, 0x20B)  # PE32+
    struct.pack_into("<II", opt, 32, SECTION_ALIGN, FILE_ALIGN)
    struct.pack_into("<I", opt, 108, 16)  # NumberOfRvaAndSizes
    if idata_index is not None:
        struct.pack_into("<II", opt, 0x70 + 8, vas[idata_index], len(table[idata_index][1]))
    if didat_index is not None:  # data directory 13: the delay-load import descriptors
        struct.pack_into("<II", opt, 0x70 + 8 * 13, vas[didat_index], len(table[didat_index][1]))
    rows = b"".join(
        struct.pack(
            "<8sIIIIIIHHI",
            name.encode()[:8],
            len(data),
            va,
            _align(len(data), FILE_ALIGN),
            off,
            0,
            0,
            0,
            0,
            chars,
        )
        for (name, data, chars), va, off in zip(table, vas, offsets, strict=True)
    )
    head = dos + b"PE\0\0" + coff + bytes(opt) + rows
    out = bytearray(head + bytes(headers - len(head)))
    for data, off in ((d, o) for (_, d, _), o in zip(table, offsets, strict=True)):
        out += data + bytes(_align(len(data), FILE_ALIGN) - len(data))
        assert len(out) == off + _align(len(data), FILE_ALIGN)
    return bytes(out)
