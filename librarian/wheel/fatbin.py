"""A pure reader of CUDA fatbinaries: the blobs in ``.nv_fatbin`` / ``__nv_relfatbin``, blobs kept as data
elsewhere, loose ``.fatbin`` files, and their entries.

The layout is NVIDIA's fatbinary container as nvcc 12 and 13 write it (a blob header, then entry headers
each followed by its payload; the checked-in nvcc builds under ``tests/data/cuda`` show every case). The reader
walks the section, never the ``.nvFatBinSegment`` wrappers (libnvjpeg has a blob no wrapper names), and
reads only entry headers, seeking past payloads, so a 1 GB section costs a few thousand small reads. To
name the toolkit it inflates the smallest cubin of each blob, bounded by a size cap and checked against
the size the entry declares, so a compression bomb raises instead of filling memory. Other data
sections are scanned for the magic (section 6). Cubins and PTX themselves are read by
:mod:`librarian.wheel.cubin`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import struct
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import BinaryIO

from librarian.coords import ArchKind, GpuArch, MajorMinor, is_sm_number
from librarian.errors import BadBinary
from librarian.facts import FatbinEntry
from librarian.wheel.cubin import PTX_HEAD, cubin_holds_code, cubin_toolkit, ptx_toolkit, read_cubin, read_ptx
from librarian.wheel.elf import ELF_MAGIC, Source

log = logging.getLogger(__name__)

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF, KIND_OLD_CUBIN, KIND_LTO = 1, 2, 4, 8
FLAG_DEBUG, FLAG_LZ4, FLAG_ZSTD = 0x2, 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY_SPECIFIC = 0x100000, 0x200000
# Every bit seen on 1113 real entries (reference, "Flags"); anything else is logged as unknown.
KNOWN_FLAGS = 0x1 | 0x2 | 0x10 | FLAG_LZ4 | FLAG_ZSTD | 0x10000 | 0x100000 | 0x200000 | 0x1000000
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")  # 0x40 bytes, reference section 3
MAX_ENTRY_HEADER = 0x1000  # headers seen are 0x40..0x80; options strings are short
MAX_ENTRIES = 1 << 20  # loop guard over a whole section
MAX_INFLATE = 256 << 20  # the most we inflate for one cubin; the smallest of a blob is far below
MAX_RATIO = 4096  # a declared ratio above this is a compression bomb, not a cubin
_CHUNK = 1 << 16
SCAN_CHUNK = 4 << 20  # magic search: a 300 MB section is read in ~75 pieces
# Cubins are read for kernels only where a member's whole device code is this small: a stub without
# kernels is a few KB (libcufftw's is 872 bytes), while a library with kernels is far bigger, so no real
# library pays for the check.
STUB_PROBE = 64 << 10

_KINDS = {
    KIND_PTX: ArchKind.PTX,
    KIND_ELF: ArchKind.SASS,
    KIND_OLD_CUBIN: ArchKind.SASS,
    KIND_LTO: ArchKind.LTO,
}


@dataclass(frozen=True, slots=True)
class EntryHeader:
    """The fixed 0x40-byte head of one fatbin entry, with where it sits in the file."""

    offset: int
    kind: int
    header_size: int
    payload_size: int
    compressed_size: int
    minor: int
    major: int
    arch: int
    flags: int
    uncompressed_size: int

    @property
    def compression(self) -> str:
        """``none``, ``lz4``, ``zstd`` or ``unknown`` (a compressed stream in a format we do not know)."""
        if self.flags & FLAG_ZSTD:
            return "zstd"
        if self.flags & FLAG_LZ4:
            return "lz4"
        return "unknown" if self.compressed_size else "none"

    @property
    def gpu_arch(self) -> GpuArch:
        """``sm_90a``, ``compute_120f``, ``lto_90``: the suffix lives only in the flags."""
        suffix = "a" if self.flags & FLAG_ARCH_SPECIFIC else "f" if self.flags & FLAG_FAMILY_SPECIFIC else ""
        return _arch(self.arch, suffix, _KINDS.get(self.kind, ArchKind.SASS))


@functools.lru_cache(maxsize=1024)
def _arch(number: int, suffix: str, kind: ArchKind) -> GpuArch:
    # A library has tens of thousands of entries over a dozen archs: each value made once, then shared.
    return GpuArch.from_number(number, suffix, kind)


def read_fatbin(
    data: BinaryIO | bytes,
    offset: int = 0,
    size: int | None = None,
    *,
    relocatable: bool = False,
    section: str = ".nv_fatbin",
) -> tuple[FatbinEntry, ...]:
    """Every entry of the fatbin blobs in ``size`` bytes at ``offset`` (a ``.nv_fatbin`` section)."""
    src = Source(data)
    size = src.size - offset if size is None else size
    if offset < 0 or size < 0 or offset + size > src.size:
        raise BadBinary(f"{section} at {offset:#x} + {size:#x} runs past the end of the file ({src.size:#x})")
    out: list[FatbinEntry] = []
    blobs = walk_blobs(src, offset, size, section)
    kernels = _kernels(src, blobs)
    for blob, toolkit in zip(blobs, _toolkits(src, blobs, blob_toolkit), strict=True):
        out += _blob_entries(blob, toolkit, relocatable, section, kernels)
    return tuple(out)


_SAMPLED: ContextVar[bool] = ContextVar("librarian_fatbin_sampled_toolkits", default=False)


@contextlib.contextmanager
def sampled_toolkits() -> Iterator[None]:
    """Within it, the blobs of one library that are alike (the same cubin ELF ABIs and archs) take the toolkit
    three of them name (the first, middle and last) where those three agree, instead of one inflated cubin
    per blob: ``doctor --env`` reads a CUDA torch's 30,000 blobs by their headers. Where the three differ,
    every blob of the kind is read, as outside it."""
    token = _SAMPLED.set(True)
    try:
        yield
    finally:
        _SAMPLED.reset(token)


def _toolkits(
    src: Source,
    blobs: Sequence[tuple[EntryHeader, ...]],
    read: Callable[[Source, tuple[EntryHeader, ...]], MajorMinor | None],
) -> list[MajorMinor | None]:
    """The toolkit of each blob: each read (``read``), or within :func:`sampled_toolkits`, by kind."""
    if not _SAMPLED.get():
        return [read(src, b) for b in blobs]
    kinds: dict[tuple[tuple[int, int, int], ...], list[int]] = defaultdict(list)
    for i, blob in enumerate(blobs):
        kinds[tuple(sorted({(h.major, h.minor, h.arch) for h in blob if h.kind == KIND_ELF}))].append(i)
    out: list[MajorMinor | None] = [None] * len(blobs)
    for kind, members in kinds.items():
        if not kind:  # no cubin: nothing to name the toolkit from (PTX says its own ISA)
            continue
        picks = sorted({members[0], members[len(members) // 2], members[-1]})
        said = {read(src, blobs[i]) for i in picks}
        if len(said) == 1:
            (toolkit,) = said
            for i in members:
                out[i] = toolkit
        else:
            for i in members:
                out[i] = read(src, blobs[i])
    return out


def _kernels(src: Source, blobs: list[tuple[EntryHeader, ...]]) -> dict[int, bool]:
    """Entry offset -> whether its cubin holds code, for tiny device code only (:data:`STUB_PROBE`)."""
    headers = [h for blob in blobs for h in blob]
    if not headers or sum(max(h.uncompressed_size, h.payload_size) for h in headers) > STUB_PROBE:
        return {}
    found = {}
    for h in headers:
        if h.kind not in (KIND_ELF, KIND_PTX):
            continue
        try:
            payload = entry_payload(src, h, STUB_PROBE)
        except BadBinary:
            continue
        # A PTX's kernels are its .entry directives (.func is device code no launch reaches): cudss's
        # commlayer stubs pair a kernel-less cubin with an empty PTX, which must not keep them "code".
        holds = cubin_holds_code(payload) if h.kind == KIND_ELF else b".entry" in payload
        if holds is not None:
            found[h.offset] = holds
    return found


def scan_fatbins(
    data: BinaryIO | bytes, offset: int = 0, size: int | None = None, *, section: str = ""
) -> tuple[FatbinEntry, ...]:
    """Every entry of the fatbin blobs found by their magic in bytes that are no fatbin section.

    For fatbins a library keeps as data and loads itself with ``cuModuleLoadData`` (libcufft holds
    24,000 of them in ``.ldata``), and for ELF files without section headers. Only blobs at 8-aligned file
    offsets that pass :func:`valid_blob_at` count, so a stray magic in code or strings does not. The
    region is read a chunk at a time, so a 300 MB section never sits in memory whole.
    """
    src = Source(data)
    size = src.size - offset if size is None else size
    if offset < 0 or size < 0 or offset + size > src.size:
        raise BadBinary(f"{section} at {offset:#x} + {size:#x} runs past the end of the file ({src.size:#x})")
    out: list[FatbinEntry] = []

    def toolkit_of(src: Source, blob: tuple[EntryHeader, ...]) -> MajorMinor | None:
        try:
            return blob_toolkit(src, blob)
        except BadBinary as e:  # found by a scan, not declared: an odd payload costs its toolkit only
            log.warning("%s: fatbin blob at %#x: %s", section or "scan", blob[0].offset, e)
            return None

    blobs = list(scan_blobs(src, offset, size))  # bounded: MAX_ENTRIES headers at most
    for blob, toolkit in zip(blobs, _toolkits(src, blobs, toolkit_of), strict=True):
        out += _blob_entries(blob, toolkit, False, section)
    return tuple(out)


def _blob_entries(
    blob: tuple[EntryHeader, ...],
    toolkit: MajorMinor | None,
    relocatable: bool,
    section: str,
    kernels: dict[int, bool] | None = None,
) -> list[FatbinEntry]:
    out = []
    for h in blob:
        if h.kind not in _KINDS:
            log.warning("%s: entry at %#x has unknown kind %d; skipped", section, h.offset, h.kind)
            continue
        if h.flags & ~KNOWN_FLAGS:
            log.info("%s: entry at %#x has unknown flags %#x", section, h.offset, h.flags & ~KNOWN_FLAGS)
        isa = (h.major, h.minor) if h.kind == KIND_PTX else None
        tk = ptx_toolkit(isa) if isa else (toolkit if h.kind != KIND_LTO else None)
        out.append(
            FatbinEntry(
                h.gpu_arch,
                relocatable,
                h.compression,
                isa,
                tk,
                bool(h.flags & FLAG_DEBUG),
                h.payload_size,
                h.uncompressed_size or h.payload_size,
                section,
                (kernels or {}).get(h.offset),
            )
        )
    return out


def scan_blobs(src: Source, offset: int, size: int) -> Iterator[tuple[EntryHeader, ...]]:
    """The entries of each valid blob whose magic sits at an 8-aligned file offset in the region."""
    needle, end, pos, count = struct.pack("<I", FATBIN_MAGIC), offset + size, offset, 0
    while pos < end:
        chunk = src.read(pos, min(SCAN_CHUNK, end - pos), "scanned section")
        # The next chunk overlaps this one by 3 bytes: a magic across the seam is found there, once.
        resume = end if pos + len(chunk) >= end else pos + len(chunk) - 3
        hit = chunk.find(needle)
        window = _Window(src, pos, chunk)  # headers inside the chunk are sliced from it, not read again
        while hit >= 0:
            blob = valid_blob_at(window, pos + hit, end)
            if blob is None:
                hit = chunk.find(needle, hit + 1)
                continue
            count += len(blob)
            if count > MAX_ENTRIES:
                raise BadBinary(f"more than {MAX_ENTRIES} fatbin entries found")
            yield blob
            blob_end = blob[-1].offset + blob[-1].header_size + blob[-1].payload_size
            if blob_end >= pos + len(chunk) - 3:  # the blob runs past this chunk: read on after it
                resume = max(resume, blob_end)
                break
            hit = chunk.find(needle, blob_end - pos)
        pos = resume


class _Window(Source):
    """A source whose bytes in ``[base, base + len(chunk))`` are at hand: read from ``chunk``, the rest from
    ``src`` (a scan's blob headers sit in the chunk it searched: 24,000 of them in libcufft)."""

    def __init__(self, src: Source, base: int, chunk: bytes) -> None:
        self._src, self._base, self._chunk, self.size = src, base, chunk, src.size

    def read(self, offset: int, length: int, what: str) -> bytes:
        start = offset - self._base
        if start >= 0 and start + length <= len(self._chunk) and length >= 0:
            return self._chunk[start : start + length]
        return self._src.read(offset, length, what)


def valid_blob_at(src: Source, pos: int, end: int) -> tuple[EntryHeader, ...] | None:
    """The entries of the blob at ``pos`` if it passes the structural check of reference section 6.

    8-aligned; version 1, header 16, ``fat_size`` a non-zero multiple of 8 inside ``end``; every entry of
    a known kind with an 8-aligned header of 0x40..0x1000 bytes, the entries tiling the blob exactly.
    """
    if pos % 8 or end - pos < 16:
        return None
    magic, version, hsz, fat_size = struct.unpack("<IHHQ", src.read(pos, 16, "fatbin blob header"))
    if magic != FATBIN_MAGIC or version != 1 or hsz != 16 or fat_size % 8:
        return None
    if not 0 < fat_size <= end - pos - 16:
        return None
    try:
        entries = _entries(src, pos + 16, pos + 16 + fat_size, "scan")
    except BadBinary:
        return None
    if any(h.kind not in _KINDS or h.header_size % 8 for h in entries):
        return None
    return entries


def read_device_code(data: BinaryIO | bytes) -> tuple[FatbinEntry, ...]:
    """The entries of a loose ``.cubin``, ``.fatbin`` or ``.ptx`` file, told apart by its first bytes."""
    src = Source(data)
    head = src.read(0, min(src.size, PTX_HEAD), "file head")
    if head.startswith(ELF_MAGIC):
        # A member in memory is read as bytes: read_cubin's lean path takes them (thousands of small cubins).
        return (read_cubin(data.getvalue() if isinstance(data, io.BytesIO) else data),)
    if head.startswith(struct.pack("<I", FATBIN_MAGIC)):
        return read_fatbin(data, section="fatbin")
    if b".version" not in head:
        raise BadBinary("neither a cubin (ELF), a fatbin nor PTX text")
    return (read_ptx(head, src.size),)


def walk_blobs(src: Source, offset: int, size: int, section: str) -> list[tuple[EntryHeader, ...]]:
    """The entry headers of each blob in the section, in order; blobs may be empty."""
    end, pos = offset + size, offset
    blobs: list[tuple[EntryHeader, ...]] = []
    count = 0
    while True:
        pos = _skip_zeros(src, pos, end)
        if pos >= end:
            return blobs
        if (pos - offset) % 8 or end - pos < 16 or _magic(src, pos) != FATBIN_MAGIC:
            found = _resync(src, pos, end, offset)
            if found is None:
                raise BadBinary(f"{section}: bytes at {pos:#x} are no fatbin header, and none follows")
            log.warning("%s: skipped %d bytes of garbage at %#x", section, found - pos, pos)
            pos = found
        _, _version, hsz, fat_size = struct.unpack("<IHHQ", src.read(pos, 16, f"{section} blob header"))
        if not 16 <= hsz <= 0x100:
            raise BadBinary(f"{section}: blob at {pos:#x} has header_size {hsz}")
        blob_end = pos + hsz + fat_size
        if blob_end > end:
            raise BadBinary(f"{section}: blob at {pos:#x} has fat_size {fat_size:#x}, past the section end")
        entries = _entries(src, pos + hsz, blob_end, section)
        count += len(entries) + 1
        if count > MAX_ENTRIES:
            raise BadBinary(f"{section}: more than {MAX_ENTRIES} fatbin entries")
        blobs.append(entries)
        pos = blob_end


def _magic(src: Source, pos: int) -> int:
    value: int = struct.unpack("<I", src.read(pos, 4, "fatbin magic"))[0]
    return value


def _skip_zeros(src: Source, pos: int, end: int) -> int:
    # Blobs may be separated (or the section ended) by zero padding: skip it a chunk at a time.
    while pos < end:
        chunk = src.read(pos, min(_CHUNK, end - pos), "fatbin section")
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return pos + len(chunk) - len(stripped)
        pos += len(chunk)
    return end


def _resync(src: Source, pos: int, end: int, base: int) -> int | None:
    # Non-zero garbage: find the next 8-aligned magic, as the reference's reader does.
    needle = struct.pack("<I", FATBIN_MAGIC)
    while pos < end:
        chunk = src.read(pos, min(_CHUNK + 3, end - pos), "fatbin section")
        hit = chunk.find(needle)
        while hit >= 0:
            if (pos + hit - base) % 8 == 0 and end - (pos + hit) >= 16:
                return pos + hit
            hit = chunk.find(needle, hit + 1)
        pos += _CHUNK
    return None


def _entries(src: Source, pos: int, end: int, section: str) -> tuple[EntryHeader, ...]:
    out = []
    while pos < end:
        if end - pos < ENTRY_HEADER.size:
            raise BadBinary(f"{section}: entry at {pos:#x} is cut off by the end of its blob")
        (kind, _u2, hsz, psize, csize, _opt, minor, major, arch, _name, _nlen, flags, _u30, usize) = (
            ENTRY_HEADER.unpack(src.read(pos, ENTRY_HEADER.size, f"{section} entry header"))
        )
        if hsz < ENTRY_HEADER.size or hsz > MAX_ENTRY_HEADER:
            raise BadBinary(f"{section}: entry at {pos:#x} has header_size {hsz:#x}")
        if pos + hsz + psize > end:
            raise BadBinary(f"{section}: entry at {pos:#x} has payload_size {psize:#x}, past its blob")
        if csize > psize:
            raise BadBinary(
                f"{section}: entry at {pos:#x} has compressed_size {csize:#x} > payload {psize:#x}"
            )
        if kind in _KINDS and not is_sm_number(arch):
            raise BadBinary(
                f"{section}: entry at {pos:#x} names arch {arch}, which no compiler emits (a corrupt field)"
            )
        out.append(EntryHeader(pos, kind, hsz, psize, csize, minor, major, arch, flags, usize))
        pos += hsz + psize  # hsz >= 0x40, so every step moves forward: no entry can loop
    return tuple(out)


def entry_payload(src: Source, h: EntryHeader, limit: int = MAX_INFLATE) -> bytes:
    """The entry's payload, inflated; BadBinary if it lies about its sizes or exceeds ``limit``."""
    where = f"entry at {h.offset:#x}"
    start = h.offset + h.header_size
    if h.compression == "none":
        if h.payload_size > limit:
            raise BadBinary(f"{where}: payload of {h.payload_size} bytes is over the {limit}-byte cap")
        return src.read(start, h.payload_size, f"{where} payload")
    stream_len = h.compressed_size or h.payload_size
    if h.uncompressed_size > limit:
        raise BadBinary(f"{where}: declares {h.uncompressed_size} bytes inflated, over the {limit}-byte cap")
    if h.uncompressed_size > MAX_RATIO * max(stream_len, 1):
        raise BadBinary(f"{where}: declares a {h.uncompressed_size // stream_len}:1 ratio (compression bomb)")
    stream = src.read(start, stream_len, f"{where} payload")
    if h.compression == "lz4":
        import lz4.block  # only when an LZ4 fatbin is met: start-up imports no codec (CUDA 12 cubins)

        try:
            out: bytes = lz4.block.decompress(stream, uncompressed_size=h.uncompressed_size)
        except lz4.block.LZ4BlockError as e:
            raise BadBinary(f"{where}: bad LZ4 stream or size ({e})") from e
    elif h.compression == "zstd":
        out = _zstd(stream, h.uncompressed_size, where)
    else:
        raise BadBinary(f"{where}: unknown compression (flags {h.flags:#x})")
    if len(out) != h.uncompressed_size:
        raise BadBinary(f"{where}: inflates to {len(out)} bytes, not the {h.uncompressed_size} it declares")
    return out


def _zstd(stream: bytes, size: int, where: str) -> bytes:
    import zstandard  # only when a zstd fatbin is met (CUDA 13): start-up imports no codec

    # Read at most one byte past the declared size: a frame that inflates further is a bomb.
    parts, total = [], 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(stream), read_across_frames=True) as r:
            while total <= size:
                piece = r.read(min(_CHUNK * 16, size + 1 - total))
                if not piece:
                    break
                parts.append(piece)
                total += len(piece)
    except zstandard.ZstdError as e:
        raise BadBinary(f"{where}: bad zstd stream ({e})") from e
    if total > size:
        raise BadBinary(f"{where}: inflates past the {size} bytes it declares (compression bomb)")
    return b"".join(parts)


def blob_toolkit(src: Source, blob: tuple[EntryHeader, ...]) -> MajorMinor | None:
    """The CUDA toolkit that assembled a blob's cubins: its smallest cubins are inflated until one says."""
    cubins = sorted(
        (h for h in blob if h.kind == KIND_ELF), key=lambda h: h.uncompressed_size or h.payload_size
    )
    for h in cubins:
        if max(h.uncompressed_size, h.payload_size) > MAX_INFLATE:
            break  # sorted: every later cubin is at least as big
        found = cubin_toolkit(entry_payload(src, h))
        if found:
            return found
    if any(h.kind == KIND_ELF and (h.major, h.minor) == (1, 8) and h.arch < 100 for h in blob):
        return (13, 0)  # ELF ABI 8 below sm_100 first came with CUDA 13.0: a lower bound
    return None
