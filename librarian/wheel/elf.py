"""A pure ELF reader: headers, sections, segments, ``.dynamic`` and version needs (the dynamic symbols are
:mod:`librarian.wheel.elf_symbols`).

Takes bytes or an open, seekable binary file and never reads more than the tables it needs, so a
1 GB ``.so`` costs a few small reads. Every offset and size is checked against the file before it is
followed; a file that lies raises a one-line :class:`BadBinary`, never a hang or a foreign traceback.
Written on ``struct`` rather than pyelftools because pyelftools raises a zoo of foreign exceptions on
lying input and reads whole sections eagerly. Big-endian ELF costs one format prefix, so it is read too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

from librarian.errors import BadBinary

ELF_MAGIC = b"\x7fELF"
MAX_TABLE = 256 << 20  # no header table, string table or symbol table of a real .so comes near this
MAX_COUNT = 1 << 20  # sections, segments, dynamic entries, version records: a loop guard

SHT_PROGBITS = 1
SHT_NOBITS = 8
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
SHT_DYNSYM = 11
SHT_GNU_HASH = 0x6FFFFFF6
SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERSYM = 0x6FFFFFFF
PT_LOAD = 1
PT_DYNAMIC = 2
DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 10, 14, 15, 29
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF

# e_machine -> the CPU name wheel platform tags use.
_MACHINES = {
    3: "i686",
    62: "x86_64",
    183: "aarch64",
    40: "armv7l",
    22: "s390x",
    243: "riscv64",
    258: "loongarch64",
    190: "cuda",
}


class Source:
    """Bytes or a seekable binary file, read at offsets with every range checked against its size."""

    def __init__(self, data: BinaryIO | bytes | bytearray | memoryview) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._bytes: bytes | None = bytes(data)
            self._file: BinaryIO | None = None
            self.size = len(self._bytes)
        else:
            self._bytes, self._file = None, data
            self.size = data.seek(0, 2)

    def read(self, offset: int, length: int, what: str) -> bytes:
        """``length`` bytes at ``offset``, or BadBinary naming ``what`` if the file is shorter."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise BadBinary(f"truncated {what} (offset {offset:#x} + {length:#x} past end {self.size:#x})")
        if self._bytes is not None:
            return self._bytes[offset : offset + length]
        assert self._file is not None
        self._file.seek(offset)
        data = self._file.read(length)
        if len(data) != length:
            raise BadBinary(f"truncated {what} (short read at {offset:#x})")
        return data


@dataclass(frozen=True, slots=True)
class Section:
    """One section header, named from the section-name string table."""

    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True, slots=True)
class Segment:
    """One program header."""

    type: int
    offset: int
    vaddr: int
    filesz: int


@dataclass(frozen=True, slots=True)
class ElfFile:
    """What librarian reads from an ELF file's headers and dynamic tables."""

    bits: int  # 32 or 64
    little_endian: bool
    osabi: int
    type: int  # ET_REL 1, ET_EXEC 2, ET_DYN 3
    machine: int
    flags: int
    sections: tuple[Section, ...]
    segments: tuple[Segment, ...]
    needed: tuple[str, ...] = ()
    soname: str | None = None
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    version_needs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (library, (GLIBC_2.17, ...))
    version: int = 1  # e_version: 1 everywhere but in ELF-ABI-7 cubins, where it is the CUDA release * 10

    @property
    def cpu(self) -> str | None:
        """The CPU name a wheel platform tag uses (``x86_64``, ``aarch64``), or ``None`` if unknown."""
        if self.machine == 21:  # EM_PPC64: the tag names its byte order
            return "ppc64le" if self.little_endian else "ppc64"
        return _MACHINES.get(self.machine)

    def section(self, name: str) -> Section | None:
        """The first section called ``name``."""
        return next((s for s in self.sections if s.name == name), None)


def sniff(src: Source, head: bytes) -> str | None | bool:
    """The CPU of an ELF file (``None``: a machine it does not name), or ``False``: no ELF file."""
    if head[:4] != ELF_MAGIC:
        return False
    return read_headers(src).cpu


def read_elf(data: BinaryIO | bytes) -> ElfFile:
    """Read the headers, ``.dynamic`` and version needs of an ELF file."""
    src = Source(data)
    return read_headers(src)


def read_headers(src: Source) -> ElfFile:
    ident = src.read(0, 16, "ELF identification")
    if ident[:4] != ELF_MAGIC:
        raise BadBinary("not an ELF file")
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise BadBinary(f"unknown ELF class {ident[4]} or byte order {ident[5]}")
    bits, e = (32 if ident[4] == 1 else 64), ("<" if ident[5] == 1 else ">")
    hfmt = e + ("HHIIIIIHHHHHH" if bits == 32 else "HHIQQQIHHHHHH")
    (
        etype,
        machine,
        version,
        _entry,
        phoff,
        shoff,
        flags,
        _ehsize,
        phentsize,
        phnum,
        shentsize,
        shnum,
        shstrndx,
    ) = struct.unpack(hfmt, src.read(16, struct.calcsize(hfmt), "ELF header"))
    sections = _sections(src, bits, e, shoff, shentsize, shnum, shstrndx)
    segments = _segments(src, bits, e, phoff, phentsize, phnum)
    elf = ElfFile(bits, e == "<", ident[7], etype, machine, flags, sections, segments, version=version)
    return _with_dynamic(src, elf)


def _unpack_table(
    src: Source, fmt: str, offset: int, entsize: int, count: int, what: str
) -> Iterator[tuple[int, ...]]:
    if count > MAX_COUNT or count * max(entsize, 1) > MAX_TABLE:
        raise BadBinary(f"{what} claims {count} entries")
    if count and entsize < struct.calcsize(fmt):
        raise BadBinary(f"{what} entry size {entsize} too small")
    table = src.read(offset, entsize * count, what)
    for i in range(count):
        yield struct.unpack_from(fmt, table, i * entsize)


def _sections(
    src: Source, bits: int, e: str, shoff: int, entsize: int, num: int, strndx: int
) -> tuple[Section, ...]:
    if shoff == 0:
        return ()  # no section headers (sstrip): the dynamic segment still answers
    fmt = e + ("IIIIIIIIII" if bits == 32 else "IIQQQQIIQQ")
    if num == 0 or strndx == 0xFFFF:  # more than 0xff00 sections: the real values live in section 0
        first = struct.unpack(fmt, src.read(shoff, struct.calcsize(fmt), "section header table"))
        num, strndx = (num or first[5]), (first[6] if strndx == 0xFFFF else strndx)
    raw = list(_unpack_table(src, fmt, shoff, entsize, num, "section header table"))
    names = b""
    if 0 < strndx < len(raw) and raw[strndx][1] != SHT_NOBITS:
        names = src.read(raw[strndx][4], raw[strndx][5], "section name table")
    out = []
    for name, typ, flg, addr, off, size, link, info, _align, ent in raw:
        out.append(
            Section(string_at(names, name, "section name"), typ, flg, addr, off, size, link, info, ent)
        )
    return tuple(out)


def _segments(src: Source, bits: int, e: str, phoff: int, entsize: int, num: int) -> tuple[Segment, ...]:
    if phoff == 0 or num == 0:
        return ()
    if bits == 32:
        rows = _unpack_table(src, e + "IIIIIIII", phoff, entsize, num, "program header table")
        return tuple(Segment(t, off, va, fsz) for t, off, va, _pa, fsz, _msz, _f, _al in rows)
    rows = _unpack_table(src, e + "IIQQQQQQ", phoff, entsize, num, "program header table")
    return tuple(Segment(t, off, va, fsz) for t, _f, off, va, _pa, fsz, _msz, _al in rows)


def string_at(table: bytes, offset: int, what: str) -> str:
    if offset == 0:
        return ""
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise BadBinary(f"{what} offset {offset:#x} outside its string table")
    return table[offset:end].decode("utf-8", "replace")


def section_bytes(src: Source, section: Section, what: str = "") -> bytes:
    """The bytes of a (small) section: a table, a note, a cubin's ``.nv.info``."""
    label = what or f"section {section.name or '#'}"
    if section.type == SHT_NOBITS:
        return b""
    if section.size > MAX_TABLE:
        raise BadBinary(f"{label} claims {section.size} bytes")
    return src.read(section.offset, section.size, label)


def _vaddr_to_offset(elf: ElfFile, vaddr: int) -> int:
    for seg in elf.segments:
        if seg.type == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return vaddr - seg.vaddr + seg.offset
    raise BadBinary(f"address {vaddr:#x} is in no loaded segment")


def _with_dynamic(src: Source, elf: ElfFile) -> ElfFile:
    e = "<" if elf.little_endian else ">"
    fmt = e + ("iI" if elf.bits == 32 else "qQ")
    step = struct.calcsize(fmt)
    dyn_sec = next((s for s in elf.sections if s.type == SHT_DYNAMIC), None)
    dyn_seg = next((s for s in elf.segments if s.type == PT_DYNAMIC), None)
    if dyn_sec is not None:
        raw = section_bytes(src, dyn_sec, ".dynamic")
    elif dyn_seg is not None:  # no section headers: the dynamic segment says the same
        raw = src.read(dyn_seg.offset, min(dyn_seg.filesz, MAX_TABLE), "dynamic segment")
    else:
        return elf
    tags: list[tuple[int, int]] = []
    for i in range(min(len(raw) // step, MAX_COUNT)):
        tag, val = struct.unpack_from(fmt, raw, i * step)
        if tag == 0:
            break
        tags.append((tag, val))
    strtab = _dynamic_strings(src, elf, dyn_sec, tags)

    def strings(which: int) -> list[str]:
        return [string_at(strtab, v, "dynamic string") for t, v in tags if t == which]

    rpath = [p for s in strings(DT_RPATH) for p in s.split(":") if p]
    runpath = [p for s in strings(DT_RUNPATH) for p in s.split(":") if p]
    sonames = strings(DT_SONAME)
    needs = _version_needs(src, elf, strtab, tags)
    return replace(
        elf,
        needed=tuple(strings(DT_NEEDED)),
        soname=sonames[0] if sonames else None,
        rpath=tuple(rpath),
        runpath=tuple(runpath),
        version_needs=needs,
    )


def _dynamic_strings(
    src: Source, elf: ElfFile, dyn_sec: Section | None, tags: list[tuple[int, int]]
) -> bytes:
    if dyn_sec is not None and 0 < dyn_sec.link < len(elf.sections):
        return section_bytes(src, elf.sections[dyn_sec.link], ".dynstr")
    addr = next((v for t, v in tags if t == DT_STRTAB), None)
    size = next((v for t, v in tags if t == DT_STRSZ), 0)
    if addr is None or size > MAX_TABLE:
        return b""
    return src.read(_vaddr_to_offset(elf, addr), size, ".dynstr")


def _version_needs(
    src: Source, elf: ElfFile, strtab: bytes, tags: list[tuple[int, int]]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    sec = next((s for s in elf.sections if s.type == SHT_GNU_VERNEED), None)
    if sec is not None:
        raw, count = section_bytes(src, sec, ".gnu.version_r"), sec.info
    else:
        addr = next((v for t, v in tags if t == DT_VERNEED), None)
        count = next((v for t, v in tags if t == DT_VERNEEDNUM), 0)
        if addr is None:
            return ()
        start = _vaddr_to_offset(elf, addr)
        raw = src.read(start, min(src.size - start, MAX_TABLE, count * 16 + 16 * 64), ".gnu.version_r")
    e = "<" if elf.little_endian else ">"
    return tuple((lib, tuple(n for n, _ in names)) for lib, names in verneed_walk(raw, count, e, strtab))


def verneed_walk(raw: bytes, count: int, e: str, strtab: bytes) -> list[tuple[str, list[tuple[str, int]]]]:
    """``.gnu.version_r``: each library and its (version name, version index) pairs; BadBinary on a lie."""
    out: list[tuple[str, list[tuple[str, int]]]] = []
    pos, guard = 0, len(raw) // 16 + 1
    for _ in range(min(count, guard)):
        if pos + 16 > len(raw):
            raise BadBinary(".gnu.version_r entry runs past its section")
        _v, cnt, file_off, aux, nxt = struct.unpack_from(e + "HHIII", raw, pos)
        names, apos = [], pos + aux
        for _ in range(min(cnt, guard)):
            if apos + 16 > len(raw):
                raise BadBinary(".gnu.version_r aux entry runs past its section")
            _h, _f, other, name, anext = struct.unpack_from(e + "IHHII", raw, apos)
            names.append((string_at(strtab, name, "version name"), other))
            if anext == 0:
                break
            apos += anext
        out.append((string_at(strtab, file_off, "version file"), names))
        if nxt == 0:
            break
        pos += nxt
    return out


def version_floor(elf: ElfFile, prefix: str) -> tuple[int, ...] | None:
    """The highest version named ``<prefix>x.y[.z]`` that the file needs (``GLIBC_``, ``GLIBCXX_``).

    The dynamic loader's own needs (``ld-linux*``, ``ld64.so.*``) are skipped, as auditwheel does: they
    name loader internals, not a glibc floor.
    """
    best: tuple[int, ...] | None = None
    for lib, names in elf.version_needs:
        if lib.startswith(("ld-linux", "ld64.so")):
            continue
        for name in names:
            parts = name.removeprefix(prefix).split(".") if name.startswith(prefix) else []
            if parts and all(p.isdigit() for p in parts):
                version = tuple(int(p) for p in parts)
                best = version if best is None or version > best else best
    return best


def glibc_floor(elf: ElfFile) -> tuple[int, ...] | None:
    """The highest ``GLIBC_x.y[.z]`` the file needs, exactly as named (``GLIBC_2.2.5`` is ``(2, 2, 5)``)."""
    return version_floor(elf, "GLIBC_")


def parse_notes(data: bytes, little_endian: bool = True) -> tuple[tuple[str, int, bytes], ...]:
    """The (owner, type, desc) records of a SHT_NOTE section's bytes; a lying size ends the walk."""
    e = "<" if little_endian else ">"
    out: list[tuple[str, int, bytes]] = []
    pos = 0
    while pos + 12 <= len(data) and len(out) < MAX_COUNT:
        namesz, descsz, ntype = struct.unpack_from(e + "III", data, pos)
        name_end = pos + 12 + namesz
        desc_start = pos + 12 + ((namesz + 3) & ~3)
        desc_end = desc_start + descsz
        if desc_end > len(data):
            raise BadBinary("note runs past its section")
        out.append(
            (
                data[pos + 12 : name_end].rstrip(b"\0").decode("utf-8", "replace"),
                ntype,
                data[desc_start:desc_end],
            )
        )
        pos = desc_start + ((descsz + 3) & ~3)
    return tuple(out)
