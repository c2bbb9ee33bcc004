"""A pure reader of bare device code: cubins (EM_CUDA ELF files) and PTX text.

Both come inside fatbin entries and as loose ``.cubin`` / ``.ptx`` wheel members (flashinfer-cubin ships
thousands). A cubin is an ELF file (machine EM_CUDA): its ``e_flags`` and ``.nv.compat`` say the arch, its
notes, ``.nv.info`` attributes or (ELF ABI 7) ``e_version`` the CUDA toolkit; the comments below say which
ABI writes what, as nvcc's own output shows (``tests/data/cuda``).
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from librarian.coords import ArchKind, GpuArch, MajorMinor, is_sm_number
from librarian.errors import BadBinary
from librarian.facts import FatbinEntry
from librarian.wheel.elf import (
    ELF_MAGIC,
    PT_DYNAMIC,
    SHT_DYNAMIC,
    SHT_NOBITS,
    ElfFile,
    Source,
    parse_notes,
    read_elf,
    section_bytes,
)

EM_CUDA = 190
ET_REL = 1
ABI7_OSABI, ABI8_OSABI = 0x33, 0x41
# How a cubin says `a` (sm_90a, sm_100a): ABI 7 sets e_flags 0x800 (0x5a0d5a vs 0x5a055a); ABI 8 from
# ptxas 12.8/12.9 sets e_flags 0x8 (0x600640a vs 0x6006402: flashinfer-cubin, ptxas 12.9.86); ABI 8 from
# CUDA 13 sets neither and writes .nv.compat attribute 0x09 = 1 instead.
ABI7_ARCH_SPECIFIC, ABI8_ARCH_SPECIFIC, COMPAT_ARCH_SPECIFIC = 0x800, 0x8, 0x09
# How a cubin says `f` (sm_100f): ptxas 12.9 and 13.0 write it only in the tkinfo note's command line
# (`-arch sm_100f`; e_flags 0x6006402, as plain sm_100: 13,646 of flashinfer-cubin 0.6.13's cubins). The
# later ABI-8 layout, e_flags >> 24 of 0x0f and 0x10 (flashinfer-cubin's trtllm-gen cubins, which carry no
# tkinfo), sets 0x4 for `f` and 0xc for `a` (30 `_sm100f` files 0x..6404, 30 `_sm103a` files 0x..670c);
# in the 0x06 layout 0x4 means nothing of the kind (nvcc 13.0 sets it on every sm_75 to sm_90 cubin).
ABI8_FAMILY_SPECIFIC, ABI8_FAMILY_LAYOUT = 0x4, 0x0F
_ARCH_OPTION = re.compile(rb"-arch[= ]+sm_(\d+)([af]?)\b")
EIATTR_CUDA_API_VERSION = 0x37  # .nv.info attribute: major*10+minor of the ptxas that assembled it
PTX_HEAD = 64 << 10  # .version and .target come before any code; only this much of a PTX file is read
# ABI-7 e_version is the CUDA release * 10 (110 for 11.0 ... 128 for 12.8; checked against EIATTR on
# bitsandbytes 0.42 and libcufft); ABI 8 writes 1. Outside this range it is not a release.
_E_VERSION_RANGE = range(70, 200)

_RELEASE = re.compile(rb"release (\d+)\.(\d+)")
_PTX_VERSION = re.compile(rb"^[ \t]*\.version[ \t]+(\d+)\.(\d+)", re.MULTILINE)
_PTX_TARGET = re.compile(rb"^[ \t]*\.target[ \t]+sm_(\d+)([af]?)\b", re.MULTILINE)

# PTX ISA major -> CUDA major, where the minor carries over (reference section 5); the rest are listed.
_ISA_LINES = {9: 13, 7: 11}
_ISA_TABLE = {
    (8, 6): (12, 7),
    (8, 7): (12, 8),
    (8, 8): (12, 9),
    (6, 5): (10, 2),
    (6, 4): (10, 1),
    (6, 3): (10, 0),
    (6, 2): (9, 2),
    (6, 1): (9, 1),
    (6, 0): (9, 0),
    (5, 0): (8, 0),
}


def read_cubin(data: BinaryIO | bytes) -> FatbinEntry:
    """The SASS arch, toolkit and kind of one cubin: a loose ``.cubin`` member, read whole."""
    if isinstance(data, bytes) and (fast := _read_cubin_lean(data)) is not None:
        return fast
    src = Source(data)
    elf = read_elf(data)
    if elf.machine != EM_CUDA:
        raise BadBinary(f"an ELF file for machine {elf.machine}, not a cubin (EM_CUDA, {EM_CUDA})")
    return FatbinEntry(
        cubin_arch(elf, src),
        elf.type == ET_REL,
        "none",
        toolkit=_toolkit(elf, src),
        payload_size=src.size,
        uncompressed_size=src.size,
        kernels=holds_code(elf),
    )


_EHDR = struct.Struct("<HHIQQQIHHHHHH")  # e_type ... e_shstrndx of a 64-bit little-endian ELF header
_SHDR = struct.Struct("<IIQQQQIIQQ")  # one 64-bit section header
_PHDR_TYPE_SIZE = 56  # a 64-bit program header
# Section names as the generic reader tests them: exactly, or by prefix. Four literal searches: one
# pattern of four alternatives is ten times slower (no fast literal scan).
_NAMES = (
    ("note", re.compile(rb"\.note\.nv\.(?:tkinfo|cuinfo)\x00")),
    ("compat", re.compile(rb"\.nv\.compat\x00")),
    ("info", re.compile(rb"\.nv\.info")),
    ("text", re.compile(rb"\.text\.")),
)


def _read_cubin_lean(data: bytes) -> FatbinEntry | None:
    """:func:`read_cubin` of a 64-bit little-endian cubin in memory, reading only the sections it needs,
    with no per-section objects (flashinfer-cubin has 16,000 loose cubins of ~25 sections each).

    ``None`` where the generic reader must decide (another ELF class or byte order, extended section
    numbering, an unusual header size, anything out of bounds): it then says what is wrong.
    """
    head = _lean_header(data)
    if head is None:
        return None
    etype, version, flags, shoff, shnum, shentsize, names = head
    # Two columns of the section header table (sh_name, sh_type) at C speed, no tuple per section:
    # flashinfer-cubin's 16,000 cubins have ~40 sections each, and 4 or 5 of them matter.
    words = memoryview(data)[shoff : shoff + shnum * shentsize].cast("I")
    name_col, type_col = words[0::16].tolist(), words[1::16].tolist()
    if SHT_DYNAMIC in type_col:
        return None  # a dynamic table: the generic reader's to read
    if max(name_col) > names.rfind(b"\0"):
        return None  # a name the table does not end: the generic reader's to say

    # A name may start inside another (string tables share suffixes): matches are kept by where they
    # start, and a section is of a kind where its name starts at one.
    kinds = {m.start(): kind for kind, pattern in _NAMES for m in pattern.finditer(names)}
    sections: dict[str, list[int]] = {}
    if kinds:
        for i, n in enumerate(name_col):
            if n in kinds:
                sections.setdefault(kinds[n], []).append(i)

    def named(kind: str) -> list[int]:
        """The indices, in section order, of the sections whose names are of ``kind`` (a group above)."""
        return sections.get(kind, [])

    def header(i: int) -> tuple[int, ...]:
        return _SHDR.unpack_from(data, shoff + i * shentsize)

    def body(i: int) -> bytes:
        _n, kind, _f, _a, off, size, *_ = header(i)
        if kind == SHT_NOBITS:
            return b""
        if off + size > len(data):
            raise _Unusual
        return data[off : off + size]

    try:
        return _lean_entry(data, etype, version, flags, named, header, body)
    except _Unusual:
        return None


def _lean_header(data: bytes) -> tuple[int, int, int, int, int, int, bytes] | None:
    """A 64-bit little-endian CUDA ELF's header as the lean reader needs it (type, version, flags, the
    section table's offset, count and entry size, the section names), else ``None`` (the generic reader's)."""
    if len(data) < 64 or data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1:
        return None
    etype, machine, version, _entry, phoff, shoff, flags, _eh, phentsize, phnum, shentsize, shnum, strndx = (
        _EHDR.unpack_from(data, 16)
    )
    if machine != EM_CUDA or shentsize != _SHDR.size or not 0 < strndx < shnum <= 0xFF00:
        return None
    if shoff + shnum * shentsize > len(data):
        return None
    if phoff and phnum:  # what the generic reader checks of the program headers; a dynamic segment is its
        if phentsize < _PHDR_TYPE_SIZE or phoff + phentsize * phnum > len(data) or phnum > 0xFF00:
            return None
        if any(struct.unpack_from("<I", data, phoff + i * phentsize)[0] == PT_DYNAMIC for i in range(phnum)):
            return None
    if sys.byteorder != "little":
        return None  # the columns below are read in the host's byte order
    _n, stype, _f, _a, names_off, names_size, *_rest = _SHDR.unpack_from(data, shoff + strndx * shentsize)
    if stype == SHT_NOBITS or names_off + names_size > len(data):
        return None
    names = data[names_off : names_off + names_size]
    return etype, version, flags, shoff, shnum, shentsize, names


class _Unusual(Exception):
    """Something the lean cubin reader leaves to the generic one (which says what is wrong)."""


def _lean_entry(
    data: bytes,
    etype: int,
    version: int,
    flags: int,
    named: Callable[[str], list[int]],
    header: Callable[[int], tuple[int, ...]],
    body: Callable[[int], bytes],
) -> FatbinEntry | None:
    """The entry, reading the sections in the order (and only as far as) the generic reader does."""
    osabi = data[7]
    compat_specific = False
    if osabi == ABI8_OSABI:
        sm = (flags >> 8) & 0xFF
        compat = named("compat")
        attrs = {attr: value for attr, value, _ in _attributes(body(compat[0]))} if compat else {}
        compat_specific = attrs.get(COMPAT_ARCH_SPECIFIC) == 1
    else:
        sm = flags & 0xFF
    if not is_sm_number(sm):
        return None  # the generic reader words the error
    suffix = _suffix(osabi, flags, compat_specific, sm, (body(i) for i in named("note")))
    arch = GpuArch.from_number(sm, suffix, ArchKind.SASS)
    toolkit = _toolkit_of((body(i) for i in named("note")), (body(i) for i in named("info")), osabi, version)
    kernels = any(header(i)[5] > 0 for i in named("text"))  # sh_size: holds_code's test
    return FatbinEntry(
        arch,
        etype == ET_REL,
        "none",
        toolkit=toolkit,
        payload_size=len(data),
        uncompressed_size=len(data),
        kernels=kernels,
    )


def _notes_toolkit(sections: Iterable[bytes], little_endian: bool = True) -> MajorMinor | None:
    for raw in sections:
        for owner, ntype, desc in parse_notes(raw, little_endian):
            if owner != "NVIDIA Corp":
                continue
            if ntype == 2000 and (m := _RELEASE.search(desc)):
                return int(m[1]), int(m[2])
            if ntype == 1000 and len(desc) >= 8 and struct.unpack_from("<H", desc)[0] == 2:
                # CUDA 13 cuinfo: u16 2, u16 sm, u32 toolkit*10. 12.8's cuver (u16 1) has no toolkit.
                tk: int = struct.unpack_from("<I", desc, 4)[0]
                return tk // 10, tk % 10
    return None


def _info_toolkit(sections: Iterable[bytes]) -> MajorMinor | None:
    for raw in sections:
        for attr, size, value in _attributes(raw):
            if attr == EIATTR_CUDA_API_VERSION and size == 4 and len(value) == 4:
                api: int = struct.unpack("<I", value)[0]
                return api // 10, api % 10
    return None


def holds_code(elf: ElfFile) -> bool:
    """Whether a cubin holds any code: each kernel and device function is a ``.text.<name>`` section."""
    return any(s.name.startswith(".text.") and s.size > 0 for s in elf.sections)


def cubin_holds_code(cubin: bytes) -> bool | None:
    """:func:`holds_code` of a cubin's bytes; ``None`` where they are no cubin this reader can parse."""
    try:
        elf = read_elf(cubin)
    except BadBinary:
        return None
    return holds_code(elf) if elf.machine == EM_CUDA else None


def cubin_arch(elf: ElfFile, src: Source) -> GpuArch:
    """``sm_90a`` / ``sm_100f`` from a cubin's ``e_flags`` (ABI 7 and 8 differ), for CUDA 13 its
    ``.nv.compat``, and where those do not say `f`, the ``-arch`` of its tkinfo note."""
    compat_specific = False
    if elf.osabi == ABI8_OSABI:
        sm = (elf.flags >> 8) & 0xFF
        compat_specific = _compat(elf, src).get(COMPAT_ARCH_SPECIFIC) == 1
    else:  # ABI 7, and the older ABIs that share its layout: sm | 0x500 | sm << 16, plus 0x800 for `a`
        sm = elf.flags & 0xFF
    if not is_sm_number(sm):
        raise BadBinary(
            f"cubin e_flags {elf.flags:#x} (ELF OS/ABI {elf.osabi:#x}) name no SM a compiler emits"
        )
    notes = (section_bytes(src, s) for s in elf.sections if s.name == ".note.nv.tkinfo")
    return GpuArch.from_number(sm, _suffix(elf.osabi, elf.flags, compat_specific, sm, notes), ArchKind.SASS)


def _suffix(osabi: int, flags: int, compat_specific: bool, sm: int, notes: Iterable[bytes]) -> str:
    """``a``, ``f`` or ``""``: the header's bits first, then the command line in the notes (read lazily)."""
    if osabi == ABI8_OSABI:
        if flags & ABI8_ARCH_SPECIFIC or compat_specific:
            return "a"
        if flags >> 24 >= ABI8_FAMILY_LAYOUT and flags & ABI8_FAMILY_SPECIFIC:
            return "f"
    elif flags & ABI7_ARCH_SPECIFIC:
        return "a"
    for raw in notes:
        if (m := _ARCH_OPTION.search(raw)) and int(m[1]) == sm:
            return m[2].decode()
    return ""


def _compat(elf: ElfFile, src: Source) -> dict[int, int]:
    sec = elf.section(".nv.compat")
    return {attr: value for attr, value, _ in _attributes(section_bytes(src, sec))} if sec else {}


def cubin_toolkit(cubin: bytes) -> MajorMinor | None:
    """The toolkit named by a cubin's tkinfo / cuinfo notes, its EIATTR_CUDA_API_VERSION or ABI-7 e_version.

    An ABI-7 cubin answers from its ELF header alone: it has no notes, and its e_version equalled its
    EIATTR on every cubin checked, so the sections need not be read (libcufft inflates 4,000 of them).
    """
    if cubin[:4] == ELF_MAGIC and len(cubin) >= 24 and cubin[7] == ABI7_OSABI:
        e_version: int = struct.unpack_from("<I", cubin, 20)[0]
        if e_version in _E_VERSION_RANGE:
            return e_version // 10, e_version % 10
    try:
        elf = read_elf(cubin)
    except BadBinary as e:
        raise BadBinary(f"cubin: {e}") from e
    return _toolkit(elf, Source(cubin))


def _toolkit(elf: ElfFile, src: Source) -> MajorMinor | None:
    notes = (section_bytes(src, s) for s in elf.sections if s.name in (".note.nv.tkinfo", ".note.nv.cuinfo"))
    infos = (section_bytes(src, s) for s in elf.sections if s.name.startswith(".nv.info"))
    return _toolkit_of(notes, infos, elf.osabi, elf.version, elf.little_endian)


def _toolkit_of(
    notes: Iterable[bytes], infos: Iterable[bytes], osabi: int, version: int, little_endian: bool = True
) -> MajorMinor | None:
    """The toolkit a cubin names: its tkinfo / cuinfo notes, else an EIATTR_CUDA_API_VERSION, else an ABI-7
    e_version (CUDA 11.0 cubins have no EIATTR 0x37; this says it). Sections are read lazily, in order."""
    found = _notes_toolkit(notes, little_endian)
    if found is None:
        found = _info_toolkit(infos)
    if found is None and osabi == ABI7_OSABI and version in _E_VERSION_RANGE:
        found = (version // 10, version % 10)
    return found


def _attributes(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    # .nv.info / .nv.compat records: u8 format, u8 attribute, u16 value-or-size; format 4 (EIFMT_SVAL)
    # has `size` bytes after. Yields (attribute, value-or-size, those bytes).
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, value = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt == 4:
            yield attr, value, data[pos : pos + value]
            pos += value
        else:
            yield attr, value, b""


def read_ptx(head: bytes, size: int | None = None) -> FatbinEntry:
    """The PTX arch (``compute_90a``), ISA and toolkit of PTX text (of ``size`` bytes) from its head."""
    text = head[:PTX_HEAD]
    version, target = _PTX_VERSION.search(text), _PTX_TARGET.search(text)
    if version is None or target is None:
        missing = ".version" if version is None else ".target sm_NN"
        raise BadBinary(f"no PTX {missing} directive in its first {PTX_HEAD} bytes")
    isa = int(version[1]), int(version[2])
    if not is_sm_number(int(target[1])):
        raise BadBinary(f".target sm_{int(target[1])} names no SM a compiler emits")
    arch = GpuArch.from_number(int(target[1]), target[2].decode(), ArchKind.PTX)
    size = len(head) if size is None else size
    return FatbinEntry(arch, False, "none", ptx_toolkit(isa), payload_size=size, uncompressed_size=size)


def ptx_toolkit(isa: MajorMinor) -> MajorMinor | None:
    """The first CUDA release whose PTX ISA is ``isa`` (a lower bound: NVRTC may emit older ISAs)."""
    if isa[0] in _ISA_LINES:
        return _ISA_LINES[isa[0]], isa[1]
    if isa[0] == 8 and isa[1] <= 5:
        return 12, isa[1]  # 8.5 is both 12.5 and 12.6: the lower one
    return _ISA_TABLE.get(isa)
