"""The dynamic symbols of an ELF file: what it exports and imports, asked one at a time through ``.gnu.hash``
as the dynamic loader asks, the symbol versions it defines, and the imports that set its glibc floor.

Read over :mod:`librarian.wheel.elf`'s headers with the same bounds: only ``.dynsym``, ``.dynstr``, the
version tables and the hash table are read, never a whole file.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from librarian.errors import BadBinary
from librarian.wheel.elf import (
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    ElfFile,
    Source,
    read_headers,
    section_bytes,
    string_at,
    verneed_walk,
)


def version_definitions(f: BinaryIO | bytes) -> tuple[str, ...]:
    """The symbol versions a shared library defines (``.gnu.version_d``): ``GLIBCXX_3.4.30``, ``CXXABI_1.3``, ...

    What a machine's libstdc++ offers is the highest ``GLIBCXX_`` it defines.
    """
    src = Source(f)
    elf = read_headers(src)
    sec = next((s for s in elf.sections if s.type == SHT_GNU_VERDEF), None)
    if sec is None:
        return ()
    if not 0 <= sec.link < len(elf.sections):
        raise BadBinary(f".gnu.version_d links to section {sec.link}, which does not exist")
    raw = section_bytes(src, sec, ".gnu.version_d")
    strtab = section_bytes(src, elf.sections[sec.link], "version strings")
    e = "<" if elf.little_endian else ">"
    names: list[str] = []
    pos, guard = 0, len(raw) // 20 + 1
    for _ in range(min(sec.info or guard, guard)):
        if pos + 20 > len(raw):
            raise BadBinary(".gnu.version_d entry runs past its section")
        _v, _flags, _ndx, cnt, _hash, aux, nxt = struct.unpack_from(e + "HHHHIII", raw, pos)
        apos = pos + aux
        for _ in range(min(cnt, guard)):
            if apos + 8 > len(raw):
                raise BadBinary(".gnu.version_d aux entry runs past its section")
            name, anext = struct.unpack_from(e + "II", raw, apos)
            names.append(string_at(strtab, name, "version name"))
            if anext == 0:
                break
            apos += anext
        if nxt == 0:
            break
        pos += nxt
    return tuple(names)


def dynamic_symbols(
    f: BinaryIO | bytes,
    elf: ElfFile | None = None,
    *,
    exports: str | None = None,
    imports: tuple[str, ...] | None = None,
) -> tuple[frozenset[str], frozenset[str]]:
    """The dynamic symbols of an ELF file: (defined and exported, undefined); ``elf``: its headers, where
    :func:`read_elf` has read them already (not read again). ``exports``: only the exported names that
    start with it (``PyInit_``) are decoded, not libtorch's hundreds of thousands; ``imports``: likewise,
    only the imported names that start with one of them."""
    src = Source(f)
    if elf is None:
        elf = read_headers(src)
    sec = next((s for s in elf.sections if s.type == SHT_DYNSYM), None)
    if sec is None or not 0 < sec.link < len(elf.sections):
        return frozenset(), frozenset()
    strtab = section_bytes(src, elf.sections[sec.link], ".dynstr")
    raw = section_bytes(src, sec, ".dynsym")
    e = "<" if elf.little_endian else ">"
    fmt = e + ("IIIBBH" if elf.bits == 32 else "IBBHQQ")
    step = struct.calcsize(fmt)
    prefix = exports.encode() if exports is not None else b""
    wanted = tuple(p.encode() for p in imports) if imports is not None else (b"",)
    defined: set[str] = set()
    undefined: set[str] = set()
    size = len(raw) - len(raw) % step
    for row in struct.iter_unpack(fmt, memoryview(raw)[step:size]):  # entry 0 is the reserved null symbol
        name_off, info, shndx = (row[0], row[3], row[5]) if elf.bits == 32 else (row[0], row[1], row[3])
        if not name_off or info >> 4 == 0:  # local symbols are not part of the dynamic interface
            continue
        if not strtab.startswith(prefix if shndx != 0 else wanted, name_off):
            continue
        name = string_at(strtab, name_off, "symbol name")
        if name:
            (undefined if shndx == 0 else defined).add(name)
    return frozenset(defined), frozenset(undefined)


def gnu_hash(name: bytes) -> int:
    """The ``.gnu.hash`` hash of a symbol name (dl_new_hash: h = h * 33 + c, from 5381, 32 bits)."""
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


class Exports:
    """The symbols an ELF library exports, asked one at a time through its ``.gnu.hash`` table (as the dynamic
    loader asks), never decoded whole: libtorch_cpu exports 400,000 names. A library without the table is
    read whole instead. ``name in exports``: whether it defines and exports ``name``."""

    def __init__(self, f: BinaryIO | bytes) -> None:
        src = Source(f)
        elf = read_headers(src)
        self._whole: frozenset[str] | None = None
        dynsym = next((s for s in elf.sections if s.type == SHT_DYNSYM), None)
        table = next((s for s in elf.sections if s.type == SHT_GNU_HASH), None)
        if dynsym is None or not 0 < dynsym.link < len(elf.sections):
            self._whole = frozenset()
            return
        if table is None or elf.bits != 64:
            self._whole = _defined(f, elf)
            return
        self._e = "<" if elf.little_endian else ">"
        self._strtab = section_bytes(src, elf.sections[dynsym.link], ".dynstr")
        self._dynsym = section_bytes(src, dynsym, ".dynsym")
        raw = section_bytes(src, table, ".gnu.hash")
        if len(raw) < 16:
            raise BadBinary(".gnu.hash is cut short")
        self._nbuckets, self._symoffset, bloom_size, self._shift = struct.unpack_from(
            self._e + "IIII", raw, 0
        )
        self._bloom = raw[16 : 16 + 8 * bloom_size]
        start = 16 + 8 * bloom_size
        self._buckets = raw[start : start + 4 * self._nbuckets]
        self._chains = raw[start + 4 * self._nbuckets :]
        self._nbloom = bloom_size
        if self._nbuckets == 0 or bloom_size == 0 or len(self._buckets) != 4 * self._nbuckets:
            raise BadBinary(".gnu.hash has no buckets")

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if self._whole is not None:
            return name in self._whole
        key = name.encode()
        h = gnu_hash(key)
        word = struct.unpack_from(self._e + "Q", self._bloom, 8 * ((h // 64) % self._nbloom))[0]
        if not (word >> (h % 64)) & 1 or not (word >> ((h >> self._shift) % 64)) & 1:
            return False
        index = struct.unpack_from(self._e + "I", self._buckets, 4 * (h % self._nbuckets))[0]
        if index < self._symoffset:
            return False
        while True:
            at = 4 * (index - self._symoffset)
            if at + 4 > len(self._chains) or 24 * (index + 1) > len(self._dynsym):
                return False
            chained = struct.unpack_from(self._e + "I", self._chains, at)[0]
            if (chained | 1) == (h | 1):
                name_off, info, _other, shndx = struct.unpack_from(self._e + "IBBH", self._dynsym, 24 * index)
                end = self._strtab.find(b"\0", name_off)
                if shndx != 0 and info >> 4 != 0 and self._strtab[name_off:end] == key:
                    return True
            if chained & 1:
                return False
            index += 1


def _defined(f: BinaryIO | bytes, elf: ElfFile) -> frozenset[str]:
    return dynamic_symbols(f, elf)[0]


def glibc_symbols(f: BinaryIO | bytes, version: str) -> frozenset[str]:
    """The undefined dynamic symbols the file imports at ``version`` (``GLIBC_2.32``): what raises its floor.

    ``.gnu.version`` gives each dynamic symbol a version index; ``.gnu.version_r``'s aux entries give each
    index its name (``vna_other``)."""
    src = Source(f)
    elf = read_headers(src)
    need = next((s for s in elf.sections if s.type == SHT_GNU_VERNEED), None)
    versym = next((s for s in elf.sections if s.type == SHT_GNU_VERSYM), None)
    dynsym = next((s for s in elf.sections if s.type == SHT_DYNSYM), None)
    if need is None or versym is None or dynsym is None or not 0 < need.link < len(elf.sections):
        return frozenset()
    if not 0 < dynsym.link < len(elf.sections):
        return frozenset()
    e = "<" if elf.little_endian else ">"
    raw, names = (
        section_bytes(src, need, ".gnu.version_r"),
        section_bytes(src, elf.sections[need.link], "strings"),
    )
    entries = verneed_walk(raw, need.info or len(raw) // 16 + 1, e, names)
    wanted = {index for _, pairs in entries for name, index in pairs if name == version}
    if not wanted:
        return frozenset()
    indexes = section_bytes(src, versym, ".gnu.version")
    strtab = section_bytes(src, elf.sections[dynsym.link], ".dynstr")
    table = section_bytes(src, dynsym, ".dynsym")
    fmt = e + ("IIIBBH" if elf.bits == 32 else "IBBHQQ")
    step = struct.calcsize(fmt)
    found: set[str] = set()
    for i in range(1, min(len(table) // step, len(indexes) // 2)):
        (index,) = struct.unpack_from(e + "H", indexes, i * 2)
        row = struct.unpack_from(fmt, table, i * step)
        shndx = row[5] if elf.bits == 32 else row[3]
        if index & 0x7FFF in wanted and shndx == 0:
            found.add(string_at(strtab, row[0], "symbol name"))
    return frozenset(found)
