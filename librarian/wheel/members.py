"""Which members of a wheel are binaries, and reading them: by name (``.so``, ``.pyd``, device code) or by
their first bytes (an executable without an extension), each inflated once (in memory, or spooled to a
temporary file past :data:`SMALL_MEMBER`) on a pool of threads, biggest first, small ones in batches, a
compression bomb refused before a byte is inflated. One binary's facts are :mod:`librarian.wheel.binaries`'.
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
from pathlib import Path
from typing import BinaryIO

from librarian import progress
from librarian.errors import BadBinary, BadWheel
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.pool import jobs_for, largest_first
from librarian.safeio import open_regular
from librarian.wheel import elf as elfmod
from librarian.wheel import zipraw

log = logging.getLogger(__name__)

Sniff = Callable[[elfmod.Source, bytes], "str | None | bool"]

from librarian.wheel.binaries import _INSPECTED, inspect_binary

SMALL_MEMBER = 8 << 20  # members up to this size are inflated into memory; bigger ones are spooled


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
