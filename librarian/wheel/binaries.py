"""The binary members of a wheel (native libraries and loose device code), read for the seven demands.

The I/O edge around the pure readers in :mod:`librarian.wheel.elf`, :mod:`librarian.wheel.fatbin` and
:mod:`librarian.wheel.cubin`. A small member is inflated into memory; a big one is streamed out of the zip into
a temporary file a chunk at a time, so memory does not grow with its size. Every member is checked against
the zip-bomb policy (:func:`librarian.wheel.zipraw.bomb_problem`) and for an unsafe name before a byte of it
is inflated, and inflated by :mod:`librarian.wheel.zipraw`, which stops at its declared size.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import queue
import re
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from librarian import progress
from librarian.coords import ArchKind, GpuArch
from librarian.errors import BadBinary, BadWheel
from librarian.facts import BinaryFacts, BinaryFormat, FatbinEntry, WheelFacts
from librarian.pool import jobs_for, largest_first
from librarian.safeio import open_regular
from librarian.wheel import elf as elfmod
from librarian.wheel import macho as machomod
from librarian.wheel import pe as pemod
from librarian.wheel import zipraw
from librarian.wheel.fatbin import read_device_code, read_fatbin, scan_fatbins

log = logging.getLogger(__name__)

Sniff = Callable[[elfmod.Source, bytes], "str | None | bool"]

FATBIN_SECTIONS = {".nv_fatbin": False, "__nv_relfatbin": True}  # name -> relocatable
WHOLE_FILE = "(whole file)"  # where a fatbin of an ELF file without section headers was found
SMALL_MEMBER = 8 << 20  # members up to this size are inflated into memory; bigger ones are spooled
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
    defined, undefined = elfmod.dynamic_symbols(
        fileobj, elf, exports="PyInit_", imports=("_Z", *_SHIM_PREFIXES)
    )
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


def _holds_data(sec: elfmod.Section) -> bool:
    # Allocated, not executable, with bytes in the file: .rodata, .lrodata, .data, .ldata, ...
    flags = sec.flags & (elfmod.SHF_ALLOC | elfmod.SHF_EXECINSTR)
    return sec.type == elfmod.SHT_PROGBITS and flags == elfmod.SHF_ALLOC and sec.name not in FATBIN_SECTIONS


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


def inspected(info: zipfile.ZipInfo) -> bool:
    """Whether a wheel member is one inspection reads by its name (a native binary or device code, not a
    folder); :func:`native_members` adds those its first bytes show to be binaries."""
    return _INSPECTED.search(info.filename) is not None and not info.is_dir()


# Members whose name says they are data or source: never sniffed. Anything else (no extension, or one not
# here) has its first bytes read: vllm's ``vllm/vllm-rs`` is a 64 MB ELF executable with no extension.
_DATA = re.compile(
    r"\.(?:py[icdw]?|pyx|pxd|pxi|txt|md|rst|json|jsonl|toml|ya?ml|cfg|ini|conf|h|hh|hpp|hxx|cuh|cu|c|cc|cpp|cxx|"
    r"inl|inc|html?|css|js|ts|map|png|jpe?g|gif|svg|ico|webp|bmp|csv|tsv|typed|pem|crt|key|jinja2?|j2|tmpl|"
    r"lock|sh|bash|zsh|fish|bat|cmd|ps1|xml|proto|pkl|pickle|npz|npy|whl|zip|tar|gz|tgz|bz2|xz|zst|lz4|7z|pt|"
    r"pth|ckpt|bin|safetensors|onnx|gguf|wav|mp3|flac|ogg|mp4|ttf|otf|woff2?|eot|mo|po|pot|jar|class|go|rs|"
    r"lua|sql|ipynb|tex|bib|cmake|mk|in|am|m4|ll|s|asm|license|licence|cff|desc|dat|db|sqlite|h5|hdf5|parquet|"
    r"arrow|feather|msgpack|tflite|mlmodel|plist|rc|def|exp|lib|a|o|obj|pdb|spec|tpl|j|yaml)$",
    re.IGNORECASE,
)
_MAGICS = (
    elfmod.ELF_MAGIC,
    b"MZ",  # PE
    b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe",  # Mach-O
    b"\xca\xfe\xba\xbe",  # Mach-O universal
)  # fmt: skip
MAX_SNIFFED = 20_000  # members whose first bytes are read, per wheel
_SNIFF_READ = 512  # compressed bytes read of each: enough to inflate its first four


def _sniffable(info: zipfile.ZipInfo) -> bool:
    name = info.filename
    top, _, leaf = name.rpartition("/")
    return (
        not info.is_dir()
        and info.file_size >= 64  # no binary header is smaller
        and ".dist-info" not in top.split("/", 1)[0]
        and _INSPECTED.search(name) is None
        and _DATA.search(leaf) is None
        and info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
    )


def _head(f: BinaryIO, info: zipfile.ZipInfo, offset: int) -> bytes:
    """The first four plain bytes of a member (bounded: at most :data:`_SNIFF_READ` compressed bytes read)."""
    size = min(info.compress_size, _SNIFF_READ)
    try:
        raw = (
            zipraw.read_at(f.fileno(), offset, size) if hasattr(os, "pread") else _read_span(f, offset, size)
        )
    except (OSError, zipraw.ZipError):
        return b""
    if info.compress_type == zipfile.ZIP_STORED:
        return raw[:4]
    try:
        return zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, 4)
    except zlib.error:
        return b""


def native_members(
    f: BinaryIO, infos: Sequence[zipfile.ZipInfo], offsets: dict[str, int]
) -> list[zipfile.ZipInfo]:
    """The members inspection reads, in member order: those named as native binaries or device code, and
    those whose first bytes are an ELF, PE or Mach-O header (an executable, a library without an extension);
    at most :data:`MAX_SNIFFED` others are sniffed."""
    out = []
    sniffed = 0
    for info in infos:
        if inspected(info):
            out.append(info)
        elif _sniffable(info) and info.orig_filename in offsets and sniffed < MAX_SNIFFED:
            sniffed += 1
            if _head(f, info, offsets[info.orig_filename]).startswith(_MAGICS):
                out.append(info)
    return out


def inspect_wheel(
    path: Path, *, jobs: int | None = None, directory: zipraw.Directory | None = None
) -> WheelFacts:
    """What every native and device-code member of a wheel demands; errors name ``wheel.whl!member``.

    A member of up to :data:`SMALL_MEMBER` bytes is inflated into memory (flashinfer-cubin has 16,000
    small cubins: no temp file each); a bigger one is spooled to a temporary file a chunk at a time.
    Members are read by ``jobs`` threads (default: the cores available): inflating, hashing and the
    zstd/LZ4 of fatbins release the GIL. Memory stays bounded by the ``jobs`` members being read, and the
    facts come back in member order, the first bad member (in that order) raising, as with one thread.
    ``directory``: the members and data offsets a caller has just read and checked
    (:func:`~librarian.wheel.wheelfile.check_archive`), taken as they are, not read again.
    """
    try:
        f = open_regular(path)  # a FIFO or a device would hang the read
    except OSError as e:
        raise BadWheel(f"{path.name}: not a readable zip ({e})") from e
    with f:
        if directory is not None:
            infos = native_members(f, directory.infos, directory.offsets)
            refuse_bombs(infos, path.name)
            return inspect_members(f, infos, directory.offsets, path.name, jobs=jobs)
        try:
            with zipfile.ZipFile(f) as zf:
                every = zf.infolist()
        except (zipfile.BadZipFile, OSError) as e:
            raise BadWheel(f"{path.name}: not a readable zip ({e})") from e
        named = [i for i in every if inspected(i)]
        refuse_bombs(named, path.name)  # names and sizes are checked before a byte is read
        try:
            offsets = zipraw.data_offsets(f, [i for i in every if inspected(i) or _sniffable(i)])
        except (OSError, zipraw.ZipError) as e:
            raise BadWheel(f"{path.name}: not a readable zip ({e})") from e
        infos = native_members(f, every, offsets)
        refuse_bombs(infos, path.name)
        return inspect_members(f, infos, offsets, path.name, jobs=jobs)


def inspect_members(
    f: BinaryIO, infos: list[zipfile.ZipInfo], offsets: dict[str, int], wheel: str, *, jobs: int | None = None
) -> WheelFacts:
    """:func:`inspect_wheel` of the open zip ``f``: ``infos`` (:func:`inspected`, past :func:`refuse_bombs`),
    their data at ``offsets``; errors name ``wheel!member``."""
    # Threads read by pread; without it, one reads by seek and read (jobs_for: 1).
    pread = hasattr(os, "pread")

    def inspect_one(info: zipfile.ZipInfo, bar: progress.Task) -> BinaryFacts:
        start = offsets[info.orig_filename]
        raws = zipraw.iter_plain_at(f.fileno(), info, start) if pread else zipraw.iter_plain(f, info, start)
        where = f"{wheel}!{info.filename}"
        with collected(info, _inflated(_in_file_bytes(raws, bar, info), where), wheel) as plain:
            return inspect_member(info, plain, wheel)

    def inspect_batch(batch: list[zipfile.ZipInfo], bar: progress.Task) -> list[BinaryFacts]:
        # Small members whose data lie close together: one read for all, one inflate call each, no
        # generators (flashinfer-cubin: 16,000 cubins; the per-member machinery cost more than inflating).
        first = offsets[batch[0].orig_filename]
        end = max(offsets[i.orig_filename] + i.compress_size for i in batch)
        try:
            window = (
                zipraw.read_at(f.fileno(), first, end - first) if pread else _read_span(f, first, end - first)
            )
        except zipraw.ZipError as e:
            raise BadWheel(f"{wheel}!{batch[0].filename}: cannot inflate ({e})") from e
        out = []
        for info in batch:
            rel = offsets[info.orig_filename] - first
            where = f"{wheel}!{info.filename}"
            try:
                plain = zipraw.inflate_whole(info, window[rel : rel + info.compress_size])
            except zipraw.ZipError as e:
                detail = str(e).removeprefix(f"{info.filename}: ")
                raise BadWheel(f"{where}: cannot inflate ({detail})") from e
            out.append(inspect_member(info, io.BytesIO(plain), wheel))
        bar.advance(sum(i.compress_size for i in batch))
        return out

    def inspect_group(group: list[zipfile.ZipInfo], bar: progress.Task) -> list[BinaryFacts]:
        return inspect_batch(group, bar) if len(group) > 1 else [inspect_one(group[0], bar)]

    # The bar counts bytes of the wheel file (compressed), which a person can compare with its size.
    with progress.task(f"inspect {wheel}", total=sum(i.compress_size for i in infos)) as bar:
        groups = _batches(infos, offsets)
        work = functools.partial(inspect_group, bar=bar)
        sizes = [sum(i.compress_size for i in group) for group in groups]
        threads = min(jobs_for(jobs), len(groups))
        if jobs is None and sum(sizes) < THREADED_MEMBER * len(infos):
            # Small members cost Python work, not inflating (which frees the GIL): threads only contend
            # for the GIL. 16,000 cubins of 2 KB inspect in 1.66 s on one thread, 2.21 s on two; those
            # of 28 KB (flashinfer-cubin) in 6.3 s on one, 5.3 s on two.
            threads = 1
        results = largest_first(work, groups, sizes, threads, "inspect")
        binaries = [facts for batch in results for facts in batch]
    return WheelFacts(filename=wheel, binaries=tuple(binaries))


BATCH_MEMBER = 256 << 10  # members up to this (inflated) are read in batches
THREADED_MEMBER = 8 << 10  # members this big (compressed, on average) are worth more than one thread
BATCH_SPAN = 4 << 20  # bytes of the archive one batch reads at once
BATCH_COUNT = 128  # members per batch: enough to spread over the threads, few enough to keep them busy


def _batches(infos: list[zipfile.ZipInfo], offsets: dict[str, int]) -> list[list[zipfile.ZipInfo]]:
    """The members in order, in groups: runs of small members whose data lie within :data:`BATCH_SPAN`
    bytes, and every other member alone."""
    groups: list[list[zipfile.ZipInfo]] = []
    run: list[zipfile.ZipInfo] = []
    start = 0
    for info in infos:
        at = offsets[info.orig_filename]
        small = info.file_size <= BATCH_MEMBER
        if run and (
            not small or len(run) >= BATCH_COUNT or at < start or at + info.compress_size - start > BATCH_SPAN
        ):
            groups.append(run)
            run = []
        if not small:
            groups.append([info])
            continue
        if not run:
            start = at
        run.append(info)
    if run:
        groups.append(run)
    return groups


def _read_span(f: BinaryIO, start: int, size: int) -> bytes:
    f.seek(start)
    data = f.read(size)
    if len(data) != size:
        raise zipraw.ZipError(f"offset {start}: archive ends inside member data")
    return data


def refuse_bombs(infos: Iterable[zipfile.ZipInfo], wheel: str) -> None:
    """BadWheel for the first member with an unsafe name or past the zip-bomb policy, before any is inflated."""
    if (bomb := first_bomb(infos, wheel)) is not None:
        raise bomb


def first_bomb(infos: Iterable[zipfile.ZipInfo], wheel: str) -> BadWheel | None:
    """The BadWheel :func:`refuse_bombs` raises (``wheel!member: why``), or None: every member may be inflated."""
    for info in infos:
        if problem := bomb_problem(info):
            return BadWheel(f"{wheel}!{info.filename}: {problem}")
    return None


def bomb_problem(info: zipfile.ZipInfo) -> str | None:
    """Why inspection refuses to inflate a member (an unsafe name, :func:`zipraw.bomb_problem`), or None."""
    if zipraw.unsafe_name(info.orig_filename):
        return "unsafe member name"
    return zipraw.bomb_problem(info)


def inspect_member(info: zipfile.ZipInfo, plain: BinaryIO, wheel: str) -> BinaryFacts:
    """:func:`inspect_binary` of a member's plain bytes; errors name ``wheel.whl!member``."""
    try:
        return inspect_binary(plain, info.filename)
    except BadBinary as e:
        raise BadBinary(f"{wheel}!{e}") from e


@contextlib.contextmanager
def collected(info: zipfile.ZipInfo, chunks: Iterable[bytes], wheel: str) -> Iterator[BinaryIO]:
    """A member's plain bytes (``chunks``, raising what they raise) as a file: in memory up to
    :data:`SMALL_MEMBER` bytes, else spooled to a temporary file a chunk at a time."""
    if info.file_size <= SMALL_MEMBER:
        yield io.BytesIO(b"".join(chunks))
        return
    with tempfile.TemporaryFile() as spool:
        _spool(chunks, spool, info.file_size, f"{wheel}!{info.filename}")
        spool.seek(0)
        yield spool


def _in_file_bytes(chunks: Iterable[bytes], bar: progress.Task, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The plain chunks, the bar advanced by the share of the member's compressed bytes each stands for."""
    ratio, done = (info.compress_size / info.file_size if info.file_size else 0.0), 0
    for chunk in chunks:
        step = int(len(chunk) * ratio)
        done += step
        bar.advance(step)
        yield chunk
    bar.advance(info.compress_size - done)  # whatever rounding left: the member is read whole


def _inflated(chunks: Iterable[bytes], where: str) -> Iterator[bytes]:
    # zipraw stops at the declared size and checks size and CRC at the end; its errors end here as one line.
    try:
        yield from chunks
    except zipraw.ZipError as e:
        detail = str(e).removeprefix(f"{where.partition('!')[2]}: ")
        raise BadWheel(f"{where}: cannot inflate ({detail})") from e


def _spool(chunks: Iterable[bytes], out: BinaryIO, size: int, where: str) -> None:
    # A second thread writes while this one inflates (both release the GIL), so spooling costs little
    # more than the inflate itself; the bounded queue keeps memory at a few chunks.
    queued: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
    writer = threading.Thread(target=_drain, args=(queued, out), daemon=True)
    writer.start()
    try:
        for chunk in chunks:
            queued.put(chunk)
    finally:
        queued.put(None)
        writer.join()
    if out.tell() != size:
        raise BadWheel(f"{where}: could not spool all {size} bytes to a temporary file")
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


def inspect_path(path: Path, *, jobs: int | None = None) -> WheelFacts:
    """Inspect a wheel, or a bare native binary as a one-member ``WheelFacts``."""
    if path.suffix == ".whl":
        return inspect_wheel(path, jobs=jobs)
    try:
        with path.open("rb") as f:
            facts = inspect_binary(f, path.name)
    except OSError as e:
        raise BadBinary(f"{path}: cannot open ({e.strerror})") from e
    # Inside a wheel an odd member is only noted; a file given alone that is no binary is a mistake.
    if facts.format is BinaryFormat.UNKNOWN:
        raise BadBinary(f"{path.name}: not a wheel, nor an ELF, PE or Mach-O binary")
    return WheelFacts(filename=path.name, binaries=(facts,))
