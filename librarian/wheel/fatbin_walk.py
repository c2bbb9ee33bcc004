"""The fatbinary container, walked by its headers: blob headers, then entry headers each followed by its
payload, read in a declared section (:func:`walk_blobs`) or found by their magic in bytes that are no fatbin
section (:func:`scan_blobs`). Payloads are skipped, never read: what they say is :mod:`librarian.wheel.fatbin`'s.
"""

from __future__ import annotations

import functools
import logging
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from librarian.coords import ArchKind, GpuArch, is_sm_number
from librarian.errors import BadBinary
from librarian.wheel.elf import Source

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
CHUNK = 1 << 16
SCAN_CHUNK = 4 << 20  # magic search: a 300 MB section is read in ~75 pieces
# The magic searched for by a compiled pattern: re's literal search runs 1.7x as fast as bytes.find on
# libraries' data sections (a CUDA torch's 1 GB of them): about half of what doctor --env spends reading.
_MAGIC_AT = re.compile(re.escape(struct.pack("<I", FATBIN_MAGIC)))

KINDS = {
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
        return _arch(self.arch, suffix, KINDS.get(self.kind, ArchKind.SASS))


@functools.lru_cache(maxsize=1024)
def _arch(number: int, suffix: str, kind: ArchKind) -> GpuArch:
    # A library has tens of thousands of entries over a dozen archs: each value made once, then shared.
    return GpuArch.from_number(number, suffix, kind)


def scan_blobs(src: Source, offset: int, size: int) -> Iterator[tuple[EntryHeader, ...]]:
    """The entries of each valid blob whose magic sits at an 8-aligned file offset in the region."""
    end, pos, count = offset + size, offset, 0
    while pos < end:
        chunk = src.read(pos, min(SCAN_CHUNK, end - pos), "scanned section")
        # The next chunk overlaps this one by 3 bytes: a magic across the seam is found there, once.
        resume = end if pos + len(chunk) >= end else pos + len(chunk) - 3
        hit = _find_magic(chunk, 0)
        window = _Window(src, pos, chunk)  # headers inside the chunk are sliced from it, not read again
        while hit >= 0:
            blob = valid_blob_at(window, pos + hit, end)
            if blob is None:
                hit = _find_magic(chunk, hit + 1)
                continue
            count += len(blob)
            if count > MAX_ENTRIES:
                raise BadBinary(f"more than {MAX_ENTRIES} fatbin entries found")
            yield blob
            blob_end = blob[-1].offset + blob[-1].header_size + blob[-1].payload_size
            if blob_end >= pos + len(chunk) - 3:  # the blob runs past this chunk: read on after it
                resume = max(resume, blob_end)
                break
            hit = _find_magic(chunk, blob_end - pos)
        pos = resume


def _find_magic(chunk: bytes, start: int) -> int:
    found = _MAGIC_AT.search(chunk, start)
    return -1 if found is None else found.start()


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
    if any(h.kind not in KINDS or h.header_size % 8 for h in entries):
        return None
    return entries


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
        chunk = src.read(pos, min(CHUNK, end - pos), "fatbin section")
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return pos + len(chunk) - len(stripped)
        pos += len(chunk)
    return end


def _resync(src: Source, pos: int, end: int, base: int) -> int | None:
    # Non-zero garbage: find the next 8-aligned magic, as the reference's reader does.
    needle = struct.pack("<I", FATBIN_MAGIC)
    while pos < end:
        chunk = src.read(pos, min(CHUNK + 3, end - pos), "fatbin section")
        hit = chunk.find(needle)
        while hit >= 0:
            if (pos + hit - base) % 8 == 0 and end - (pos + hit) >= 16:
                return pos + hit
            hit = chunk.find(needle, hit + 1)
        pos += CHUNK
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
        if kind in KINDS and not is_sm_number(arch):
            raise BadBinary(
                f"{section}: entry at {pos:#x} names arch {arch}, which no compiler emits (a corrupt field)"
            )
        out.append(EntryHeader(pos, kind, hsz, psize, csize, minor, major, arch, flags, usize))
        pos += hsz + psize  # hsz >= 0x40, so every step moves forward: no entry can loop
    return tuple(out)
