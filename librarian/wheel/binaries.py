"""One binary's facts for the seven demands: a native library (ELF, PE, Mach-O) or loose device code, told
apart by its first bytes and read by the pure readers in :mod:`librarian.wheel.elf`, :mod:`librarian.wheel.pe`,
:mod:`librarian.wheel.macho`, :mod:`librarian.wheel.fatbin` and :mod:`librarian.wheel.cubin`. Which members of
a wheel are binaries, and inflating them within the zip-bomb policy, is :mod:`librarian.wheel.members`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO

from librarian.coords import ArchKind, GpuArch
from librarian.errors import BadBinary
from librarian.facts import BinaryFacts, BinaryFormat, FatbinEntry
from librarian.wheel import elf as elfmod
from librarian.wheel import macho as machomod
from librarian.wheel import pe as pemod
from librarian.wheel.elf_symbols import dynamic_symbols
from librarian.wheel.fatbin import read_device_code, read_fatbin, scan_fatbins

log = logging.getLogger(__name__)

Sniff = Callable[[elfmod.Source, bytes], "str | None | bool"]

FATBIN_SECTIONS = {".nv_fatbin": False, "__nv_relfatbin": True}  # name -> relocatable
WHOLE_FILE = "(whole file)"  # where a fatbin of an ELF file without section headers was found
_NATIVE = re.compile(r"\.(?:so(?:\.\d+)*|pyd|dylib|dll)$", re.IGNORECASE)
_DEVICE_CODE = re.compile(r"\.(?:cubin|fatbin|ptx)$", re.IGNORECASE)
_INSPECTED = re.compile(
    r"\.(?:so(?:\.\d+)*|pyd|dylib|dll|cubin|fatbin|ptx)$", re.IGNORECASE
)  # either of the two
# Mangled names of libtorch / libc10 / ATen: namespaces c10, at, torch, caffe2, behind an optional
# vtable/typeinfo prefix (TV, TI, TS) and cv-qualifiers (K, V, r).
_TORCH_SYMBOL = re.compile(r"_Z(?:T[VIS])?N?[KVr]*(?:3c10|2at|5torch|6caffe2)")
# MSVC mangles a name's namespaces innermost first, the outermost just before "@@": ?fn@detail@c10@@...
# torch's stable C shim (torch/csrc/stable, the AOTI shim): plain C names, imported by stable-ABI builds
_SHIM_PREFIXES = ("aoti_torch_", "torch_")
_MSVC_TORCH_SYMBOL = re.compile(r"^\?.*?@(?:c10|at|torch|caffe2)@@")


def is_native(name: str) -> bool:
    """Whether a wheel member is a native binary we inspect (``.so``, ``.so.N``, ``.pyd``, ``.dylib``)."""
    return _NATIVE.search(name) is not None


def is_device_code(name: str) -> bool:
    """Whether a wheel member is loose device code the driver loads (``.cubin``, ``.fatbin``, ``.ptx``)."""
    return _DEVICE_CODE.search(name) is not None


def inspect_binary(fileobj: BinaryIO, path: str) -> BinaryFacts:
    """What one native binary or loose device-code file (by its name) demands; errors start with ``path``."""
    try:
        if is_device_code(path):
            return _device_facts(path, BinaryFormat.CUDA, None, read_device_code(fileobj))
        return _inspect(fileobj, path)
    except BadBinary as e:
        raise BadBinary(f"{path}: {e}") from e
    except (OSError, MemoryError) as e:  # a read of the spooled file failed: still one line
        raise BadBinary(f"{path}: cannot read ({e})") from e


def _inspect(fileobj: BinaryIO, path: str) -> BinaryFacts:
    fileobj.seek(0)
    if fileobj.read(len(elfmod.ELF_MAGIC)) == elfmod.ELF_MAGIC:  # the common case; its sniff parses it whole
        return _inspect_elf(fileobj, path, None)
    fmt, cpu = identify(fileobj)  # the formats' own sniffs, in turn
    row = next((f for f in FORMATS if f.format is fmt), None)
    return row.read(fileobj, path, cpu) if row is not None else BinaryFacts(path=path, format=fmt, cpu=cpu)


def _inspect_elf(fileobj: BinaryIO, path: str, cpu: str | None) -> BinaryFacts:
    """A Linux ``.so``: fatbins in ``.nv_fatbin`` / ``__nv_relfatbin`` and by magic in data sections, glibc
    and GLIBCXX floors, the libraries it needs and the torch symbols it imports."""
    elf = elfmod.read_elf(fileobj)
    fmt, cpu = BinaryFormat.ELF, elf.cpu
    entries: list[FatbinEntry] = []
    for sec in elf.sections:
        if sec.name in FATBIN_SECTIONS and sec.type != elfmod.SHT_NOBITS:
            entries += read_fatbin(
                fileobj, sec.offset, sec.size, relocatable=FATBIN_SECTIONS[sec.name], section=sec.name
            )
        elif _holds_data(sec):  # fatbins a library loads itself (cuModuleLoadData): libcufft's .ldata
            entries += scan_fatbins(fileobj, sec.offset, sec.size, section=sec.name)
    if not elf.sections:  # no section headers (sstrip): the magic scan is all there is
        entries += scan_fatbins(fileobj, section=WHOLE_FILE)
    # its headers not read a second time; of its exports only a PyInit_ is looked for, of its imports
    # only C++ names (_TORCH_SYMBOL's) and the stable shim's
    defined, undefined = dynamic_symbols(fileobj, elf, exports="PyInit_", imports=("_Z", *_SHIM_PREFIXES))
    return replace(
        _device_facts(path, fmt, cpu, entries),
        glibc=elfmod.glibc_floor(elf),
        glibcxx=elfmod.version_floor(elf, "GLIBCXX_"),
        cxxabi=elfmod.version_floor(elf, "CXXABI_"),
        needed=elf.needed,
        soname=elf.soname,
        rpath=elf.rpath + elf.runpath,
        torch_symbols=tuple(sorted(s for s in undefined if _TORCH_SYMBOL.match(s))),
        shim_symbols=tuple(sorted(s for s in undefined if s.startswith(_SHIM_PREFIXES))),
        embedded=tuple(dict.fromkeys(e.section for e in entries if e.section not in FATBIN_SECTIONS)),
        extension=any(s.startswith("PyInit_") for s in defined),
    )


# PE cuts section names to 8 bytes: .nv_fatbin is .nv_fatb, __nv_relfatbin is __nv_rel.
PE_FATBIN_SECTIONS = {".nv_fatb": False, "__nv_rel": True}


def _inspect_pe(fileobj: BinaryIO, path: str, cpu: str | None) -> BinaryFacts:
    """A Windows ``.pyd`` / ``.dll``: fatbins in ``.nv_fatb`` / ``__nv_rel`` and by magic in data sections,
    the DLLs it imports and the MSVC-mangled torch symbols among what it imports."""
    pe = pemod.read_pe(fileobj)
    entries: list[FatbinEntry] = []
    for sec in pe.sections:
        if sec.name in PE_FATBIN_SECTIONS and sec.size:
            entries += read_fatbin(
                fileobj, sec.offset, sec.size, relocatable=PE_FATBIN_SECTIONS[sec.name], section=sec.name
            )
        elif sec.holds_data and sec.size:  # fatbins a library loads itself: Windows cuFFT's .data
            entries += scan_fatbins(fileobj, sec.offset, sec.size, section=sec.name)
    named = (".nv_fatb", "__nv_rel")
    return replace(
        _device_facts(path, BinaryFormat.PE, pe.cpu or cpu, entries),
        needed=pe.dlls,
        torch_symbols=tuple(sorted(s for s in pe.imported if _MSVC_TORCH_SYMBOL.search(s))),
        shim_symbols=tuple(sorted(s for s in pe.imported if s.startswith(_SHIM_PREFIXES))),
        embedded=tuple(dict.fromkeys(e.section for e in entries if e.section not in named)),
    )


def _inspect_macho(fileobj: BinaryIO, path: str, cpu: str | None) -> BinaryFacts:
    """A macOS ``.so`` / ``.dylib`` (thin or universal2): no device code (macOS has no CUDA); the dylibs it
    loads and the mangled torch symbols among what it imports."""
    macho = machomod.read_macho(fileobj)
    symbols = tuple(sorted(s for s in macho.imported if _TORCH_SYMBOL.match(s)))
    shims = tuple(sorted(s for s in macho.imported if s.startswith(_SHIM_PREFIXES)))
    return BinaryFacts(
        path=path,
        format=BinaryFormat.MACHO,
        cpu=cpu,
        needed=macho.dylibs,
        torch_symbols=symbols,
        shim_symbols=shims,
    )


@dataclass(frozen=True)
class Format:
    """One native binary format: how its first bytes are told (its reader's ``sniff``: the CPU, or False),
    and how a member of it is read for the demands. A new format is one reader module and one row here
    (with its value in :class:`~librarian.facts.BinaryFormat` and its words in ``data/platforms.toml``)."""

    format: BinaryFormat
    sniff: Sniff
    read: Callable[[BinaryIO, str, str | None], BinaryFacts]


# In the order they are tried; the first that knows the bytes says the format and the CPU.
FORMATS: tuple[Format, ...] = (
    Format(BinaryFormat.ELF, elfmod.sniff, _inspect_elf),
    Format(BinaryFormat.PE, pemod.sniff, _inspect_pe),
    Format(BinaryFormat.MACHO, machomod.sniff, _inspect_macho),
)


def identify(data: BinaryIO | bytes) -> tuple[BinaryFormat, str | None]:
    """The container format and CPU of a native binary, from its magic and machine field."""
    src = elfmod.Source(data)
    head = src.read(0, min(src.size, 64), "file header")
    for row in FORMATS:
        cpu = row.sniff(src, head)
        if cpu is not False:
            return row.format, cpu if isinstance(cpu, str) else None
    return BinaryFormat.UNKNOWN, None


# Sections the toolchain writes in formats of its own, which no program's data lands in: DWARF call-frame
# information and its index, exception tables, the global offset tables. On a CUDA torch's 112 libraries
# they are 100 MB that the magic scan read for nothing (its blobs sit in .rodata, .ldata, .cask_resource).
TOOLCHAIN_SECTIONS = frozenset({".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".got", ".got.plt"})


def _holds_data(sec: elfmod.Section) -> bool:
    # Allocated, not executable, with bytes in the file: .rodata, .lrodata, .data, .ldata, ...
    flags = sec.flags & (elfmod.SHF_ALLOC | elfmod.SHF_EXECINSTR)
    return (
        sec.type == elfmod.SHT_PROGBITS
        and flags == elfmod.SHF_ALLOC
        and sec.name not in FATBIN_SECTIONS
        and sec.name not in TOOLCHAIN_SECTIONS
    )


def _device_facts(
    path: str, fmt: BinaryFormat, cpu: str | None, entries: Sequence[FatbinEntry]
) -> BinaryFacts:
    if len(entries) == 1:  # a loose cubin or PTX file (thousands in a wheel): no sets to fold
        (e,) = entries
        one = (e.arch,)
        kind, reloc = e.arch.kind, e.relocatable
        return BinaryFacts(
            path=path,
            format=fmt,
            cpu=cpu,
            sass=one if kind is ArchKind.SASS and not reloc else (),
            ptx=one if kind is ArchKind.PTX and not reloc else (),
            relocatable_sass=one if kind is ArchKind.SASS and reloc else (),
            relocatable_ptx=one if kind is ArchKind.PTX and reloc else (),
            lto=one if kind is ArchKind.LTO else (),
            toolkit=e.toolkit,
            no_kernels=e.kernels is False,
        )

    def archs(kind: ArchKind, relocatable: bool) -> tuple[GpuArch, ...]:
        return tuple(
            sorted({e.arch for e in entries if e.arch.kind is kind and e.relocatable is relocatable})
        )

    return BinaryFacts(
        path=path,
        format=fmt,
        cpu=cpu,
        sass=archs(ArchKind.SASS, False),
        ptx=archs(ArchKind.PTX, False),
        relocatable_sass=archs(ArchKind.SASS, True),
        relocatable_ptx=archs(ArchKind.PTX, True),
        lto=tuple(sorted({e.arch for e in entries if e.arch.kind is ArchKind.LTO})),
        toolkit=max((e.toolkit for e in entries if e.toolkit), default=None),
        no_kernels=bool(entries) and all(e.kernels is False for e in entries),
    )
