"""A pure reader of CUDA fatbinaries: the blobs in ``.nv_fatbin`` / ``__nv_relfatbin``, blobs kept as data
elsewhere, loose ``.fatbin`` files, and their entries.

The layout is NVIDIA's fatbinary container as nvcc 12 and 13 write it (a blob header, then entry headers
each followed by its payload; the checked-in nvcc builds under ``tests/data/cuda`` show every case). The reader
walks the section (:mod:`librarian.wheel.fatbin_walk`), never the ``.nvFatBinSegment`` wrappers (libnvjpeg has a blob no wrapper names), and
reads only entry headers, seeking past payloads, so a 1 GB section costs a few thousand small reads. To
name the toolkit it inflates the smallest cubin of each blob, bounded by a size cap and checked against
the size the entry declares, so a compression bomb raises instead of filling memory. Other data
sections are scanned for the magic (section 6). Cubins and PTX themselves are read by
:mod:`librarian.wheel.cubin`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import struct
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import BinaryIO

from librarian.coords import MajorMinor
from librarian.errors import BadBinary
from librarian.facts import FatbinEntry
from librarian.wheel.cubin import PTX_HEAD, cubin_holds_code, cubin_toolkit, ptx_toolkit, read_cubin, read_ptx
from librarian.wheel.elf import ELF_MAGIC, Source
from librarian.wheel.fatbin_walk import (
    CHUNK,
    FATBIN_MAGIC,
    FLAG_DEBUG,
    KIND_ELF,
    KIND_LTO,
    KIND_PTX,
    KINDS,
    KNOWN_FLAGS,
    EntryHeader,
    scan_blobs,
    walk_blobs,
)

log = logging.getLogger(__name__)

MAX_INFLATE = 256 << 20  # the most we inflate for one cubin; the smallest of a blob is far below
MAX_RATIO = 4096  # a declared ratio above this is a compression bomb, not a cubin
# Cubins are read for kernels only where a member's whole device code is this small: a stub without
# kernels is a few KB (libcufftw's is 872 bytes), while a library with kernels is far bigger, so no real
# library pays for the check.
STUB_PROBE = 64 << 10


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
        if h.kind not in KINDS:
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
                tk,
                bool(h.flags & FLAG_DEBUG),
                h.payload_size,
                h.uncompressed_size or h.payload_size,
                section,
                (kernels or {}).get(h.offset),
            )
        )
    return out


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
                piece = r.read(min(CHUNK * 16, size + 1 - total))
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
