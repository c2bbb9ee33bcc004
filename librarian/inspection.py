"""Inspection: the seven demands of a wheel, read from the bytes of its native members.

The I/O edge around the pure readers in :mod:`librarian.elf` and :mod:`librarian.fatbin`. A member is
streamed out of the zip into a temporary file a chunk at a time, so memory does not grow with its size,
and every member is checked for zip-bomb sizes and unsafe names before a byte of it is inflated.
"""

from __future__ import annotations

import logging
import queue
import re
import tempfile
import threading
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from librarian import elf as elfmod
from librarian import progress
from librarian.coords import ArchKind, GpuArch
from librarian.errors import BadBinary, BadWheel
from librarian.facts import BinaryFacts, BinaryFormat, FatbinEntry, WheelFacts
from librarian.fatbin import read_fatbin

log = logging.getLogger(__name__)

FATBIN_SECTIONS = {".nv_fatbin": False, "__nv_relfatbin": True}  # name -> relocatable
MAX_MEMBER = 16 << 30  # declared inflated size of one member: no real .so comes near
MAX_RATIO = 200  # inflated / compressed; real .so files stay far below (zeros would not)
CHUNK = 1 << 20
_NATIVE = re.compile(r"\.(?:so(?:\.\d+)*|pyd|dylib|dll)$", re.IGNORECASE)
# Mangled names of libtorch / libc10 / ATen: namespaces c10, at, torch, caffe2, behind an optional
# vtable/typeinfo prefix (TV, TI, TS) and cv-qualifiers (K, V, r).
_TORCH_SYMBOL = re.compile(r"_Z(?:T[VIS])?N?[KVr]*(?:3c10|2at|5torch|6caffe2)")


def is_native(name: str) -> bool:
    """Whether a wheel member is a native binary we inspect (``.so``, ``.so.N``, ``.pyd``, ``.dylib``)."""
    return _NATIVE.search(name) is not None


def inspect_binary(fileobj: BinaryIO, path: str) -> BinaryFacts:
    """What one native binary demands; errors start with ``path``."""
    try:
        return _inspect(fileobj, path)
    except BadBinary as e:
        raise BadBinary(f"{path}: {e}") from e
    except (OSError, MemoryError) as e:  # a read of the spooled file failed: still one line
        raise BadBinary(f"{path}: cannot read ({e})") from e


def _inspect(fileobj: BinaryIO, path: str) -> BinaryFacts:
    fmt, cpu = elfmod.identify(fileobj)
    if fmt is not BinaryFormat.ELF:
        return BinaryFacts(path=path, format=fmt, cpu=cpu)
    elf = elfmod.read_elf(fileobj)
    entries: list[FatbinEntry] = []
    for sec in elf.sections:
        if sec.name in FATBIN_SECTIONS and sec.type != elfmod.SHT_NOBITS:
            entries += read_fatbin(fileobj, sec.offset, sec.size, relocatable=FATBIN_SECTIONS[sec.name],
                                   section=sec.name)  # fmt: skip
    _defined, undefined = elfmod.dynamic_symbols(fileobj)

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
        glibc=elfmod.glibc_floor(elf),
        glibcxx=elfmod.version_floor(elf, "GLIBCXX_"),
        cxxabi=elfmod.version_floor(elf, "CXXABI_"),
        needed=elf.needed,
        soname=elf.soname,
        rpath=elf.rpath + elf.runpath,
        torch_symbols=tuple(sorted(s for s in undefined if _TORCH_SYMBOL.match(s))),
    )


def inspect_wheel(path: Path) -> WheelFacts:
    """What every native member of a wheel demands; errors name ``wheel.whl!member``."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadWheel(f"{path.name}: not a readable zip ({e})") from e
    binaries = []
    with zf:
        natives = [i for i in zf.infolist() if not i.is_dir() and is_native(i.filename)]
        total = sum(i.file_size for i in natives)
        with progress.task(f"inspect {path.name}", total=total) as bar:
            for info in natives:
                binaries.append(_inspect_member(zf, info, path, bar))
    return WheelFacts(filename=path.name, binaries=tuple(binaries))


def _inspect_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, bar: progress.Task) -> BinaryFacts:
    where = f"{path.name}!{info.filename}"
    _check_member(info, where)
    with tempfile.TemporaryFile() as spool:
        _spool(zf, info, spool, where, bar)
        try:
            return inspect_binary(spool, info.filename)
        except BadBinary as e:
            raise BadBinary(f"{path.name}!{e}") from e


def _check_member(info: zipfile.ZipInfo, where: str) -> None:
    parts = PurePosixPath(info.filename.replace("\\", "/")).parts
    if info.filename.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise BadWheel(f"{where}: unsafe member name")
    if info.file_size > MAX_MEMBER:
        raise BadWheel(f"{where}: declares {info.file_size} bytes, over the {MAX_MEMBER}-byte cap")
    if info.file_size > MAX_RATIO * max(info.compress_size, 1) and info.file_size > CHUNK:
        raise BadWheel(f"{where}: compresses {info.file_size // max(info.compress_size, 1)}:1 (zip bomb?)")


def _spool(zf: zipfile.ZipFile, info: zipfile.ZipInfo, out: BinaryIO, where: str, bar: progress.Task) -> None:
    # zipfile stops at the declared size and checks the CRC at the end, so a member that inflates
    # past its header, or to other bytes, raises here; the count catches one that inflates short.
    # A second thread writes while this one inflates (both release the GIL), so spooling costs little
    # more than the inflate itself; the bounded queue keeps memory at a few chunks.
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
    writer = threading.Thread(target=_drain, args=(chunks, out), daemon=True)
    writer.start()
    total = 0
    try:
        with zf.open(info) as member:
            while chunk := member.read(CHUNK):
                total += len(chunk)
                chunks.put(chunk)
                bar.advance(len(chunk))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise BadWheel(f"{where}: cannot inflate ({e})") from e
    except Exception as e:  # zlib.error, lzma.LZMAError, ...: foreign errors end at this boundary
        raise BadWheel(f"{where}: cannot inflate ({type(e).__name__}: {e})") from e
    finally:
        chunks.put(None)
        writer.join()
    if total != info.file_size:
        raise BadWheel(f"{where}: inflates to {total} bytes, not the {info.file_size} it declares")
    if out.tell() != total:
        raise BadWheel(f"{where}: could not spool all {total} bytes to a temporary file")
    out.flush()


def _drain(chunks: queue.Queue[bytes | None], out: BinaryIO) -> None:
    # Keep taking chunks after a failed write so the inflating thread never blocks on a full queue;
    # the caller sees the short file through out.tell().
    failed = False
    while (chunk := chunks.get()) is not None:
        if not failed:
            try:
                out.write(chunk)
            except OSError:
                failed = True


def inspect_path(path: Path) -> WheelFacts:
    """Inspect a wheel, or a bare native binary as a one-member ``WheelFacts``."""
    if path.suffix == ".whl":
        return inspect_wheel(path)
    try:
        with path.open("rb") as f:
            facts = inspect_binary(f, path.name)
    except OSError as e:
        raise BadBinary(f"{path}: cannot open ({e.strerror})") from e
    # Inside a wheel an odd member is only noted; a file given alone that is no binary is a mistake.
    if facts.format is BinaryFormat.UNKNOWN:
        raise BadBinary(f"{path.name}: not a wheel, nor an ELF, PE or Mach-O binary")
    return WheelFacts(filename=path.name, binaries=(facts,))
