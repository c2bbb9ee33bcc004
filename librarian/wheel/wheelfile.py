"""Reading a wheel: open it safely, read METADATA / WHEEL / RECORD, check RECORD, check what it claims.

Every member is streamed in bounded chunks (:mod:`librarian.wheel.zipraw`), so memory does not grow with the
wheel. Rewriting one is :mod:`librarian.wheel.retag`.
Wheel format: https://packaging.python.org/en/latest/specifications/binary-distribution-format/
"""

from __future__ import annotations

import base64
import contextlib
import csv
import functools
import hashlib
import io
import logging
import os
import struct
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import BinaryIO

from packaging.tags import parse_tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from librarian import safeio
from librarian.coords import WheelName
from librarian.errors import BadInput, BadWheel
from librarian.index import IndexEntry, entry_problems
from librarian.pool import Pipeline, default_jobs
from librarian.safeio import open_regular
from librarian.wheel import zipraw

log = logging.getLogger(__name__)

# METADATA, WHEEL and RECORD are read whole; past these sizes a file is not one we want to parse (a
# 63 MB METADATA in a 72 KB wheel once cost 745 MB of memory). Real ones: METADATA < 1 MB (with a long
# README), WHEEL < 1 KB, RECORD ~120 bytes per member.
_SMALL_LIMITS = {"METADATA": 8 << 20, "WHEEL": 1 << 20, "RECORD": 32 << 20}
_SMALL_LIMIT = 8 << 20  # any other file read whole
# RECORD.jws / RECORD.p7s sign the old RECORD: carried over they would be stale, so retag drops them.
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")
# PEP 376 / the wheel spec allow sha256 or stronger; md5 and sha1 are refused.
_HASHES = ("sha256", "sha384", "sha512")
_S_IFLNK = 0o120000
_BATCH = 4 << 20  # compressed bytes of small members checked as one piece of work on a thread
_BATCH_MEMBERS = 256
_INLINE = 16 << 10  # compressed bytes under which a member is checked in the calling thread  # a member's unix file type (external_attr >> 16) for a symbolic link


@dataclass(frozen=True, slots=True)
class Member:
    """One file in a wheel: its path (POSIX), plain and compressed sizes, unix permission bits."""

    path: str
    size: int
    compressed_size: int
    mode: int
    link: bool = False  # the unix file type says symbolic link


@dataclass(frozen=True, slots=True)
class WheelInfo:
    """What a wheel says about itself, read without inflating its payload."""

    filename: WheelName
    metadata_name: str
    metadata_version: str
    wheel_tags: tuple[str, ...]
    dist_info: str
    members: tuple[Member, ...]
    requires_python: str | None = None  # METADATA's Requires-Python, as written
    metadata: bytes = b""  # METADATA's bytes: served beside the wheel as ``<wheel>.metadata`` (PEP 658)

    @property
    def name(self) -> str:
        """The distribution name as the filename spells it."""
        return self.filename.distribution

    @property
    def version(self) -> Version:
        """The version the filename claims."""
        return self.filename.version

    def mismatches(self) -> tuple[str, ...]:
        """Each way METADATA or WHEEL disagrees with the filename, as ``<what>: <problem>`` lines."""
        problems = []
        if canonicalize_name(self.metadata_name) != canonicalize_name(self.name):
            problems.append(f"METADATA Name: {self.metadata_name}, filename says {self.name}")
        if _version(self.metadata_version) != self.version:
            problems.append(f"METADATA Version: {self.metadata_version}, filename says {self.version}")
        wheel: set[str] = set()
        for text in self.wheel_tags:
            try:
                wheel.update(str(t) for t in parse_tag(text))
            except ValueError:
                wheel.add(text)
        if wheel != {str(t) for t in self.filename.tags}:
            problems.append(f"WHEEL Tag: {', '.join(sorted(wheel))}, filename says {self.filename.tag_text}")
        return tuple(problems)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def sha256_file(path: Path) -> str:
    """The sha256 of a file as hex, read in chunks."""
    return safeio.sha256_file(path, zipraw.CHUNK)


def _digest_field(h: hashlib._Hash) -> str:
    """A RECORD hash field: ``sha256=<urlsafe base64, no padding>``."""
    return f"{h.name}={base64.urlsafe_b64encode(h.digest()).rstrip(b'=').decode()}"


@dataclass(frozen=True, slots=True)
class _Row:
    """One RECORD line: the hash field (``algo=b64`` or empty) and the size field (or empty)."""

    digest: str
    size: str


class _Wheel:
    """An open wheel whose structure has been checked: names, one matching dist-info, local headers."""

    def __init__(self, path: Path, f: BinaryIO, zf: zipfile.ZipFile, name: WheelName | None = None) -> None:
        self.path, self.f, self.zf = path, f, zf
        self.name = _parse_filename(path) if name is None else name
        self.infos = zf.infolist()
        self.dist_info = _check_layout(self.name, self.infos)
        self.data_dir = self.dist_info.removesuffix(".dist-info") + ".data"
        self.by_name = {i.orig_filename: i for i in self.infos}
        self.offsets = zipraw.data_offsets(f, self.infos)
        self.rows: dict[str, _Row] = {}

    def bad(self, problem: str) -> BadWheel:
        """A one-line BadWheel naming this file."""
        return BadWheel(f"{self.path}: {problem}")

    def member(self, leaf: str) -> zipfile.ZipInfo:
        """The dist-info member ``leaf`` (``METADATA``); BadWheel if missing."""
        info = self.by_name.get(f"{self.dist_info}/{leaf}")
        if info is None:
            raise self.bad(f"no {self.dist_info}/{leaf}")
        return info

    def plain(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The member's plain bytes in chunks."""
        return zipraw.iter_plain(self.f, info, self.offsets[info.orig_filename])

    def raw(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The member's compressed bytes in chunks."""
        return zipraw.iter_raw(self.f, self.offsets[info.orig_filename], info.compress_size)

    def read_small(self, info: zipfile.ZipInfo) -> bytes:
        """A metadata member, whole; refused past its limit (:data:`_SMALL_LIMITS`)."""
        limit = _SMALL_LIMITS.get(info.orig_filename.rpartition("/")[2], _SMALL_LIMIT)
        if info.file_size > limit:
            raise self.bad(f"{info.orig_filename}: {info.file_size} bytes, over the {limit}-byte limit for a metadata file")
        return b"".join(self.plain(info))

    def headers(self, leaf: str) -> tuple[bytes, dict[str, list[str]]]:
        """A dist-info email-header file (METADATA, WHEEL): its bytes and its headers."""
        data = self.read_small(self.member(leaf))
        try:
            msg = HeaderParser().parsestr(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise self.bad(f"{self.dist_info}/{leaf}: not UTF-8 ({e})") from e
        return data, {k: [str(v) for v in msg.get_all(k, [])] for k in msg}

    def read_record(self) -> dict[str, _Row]:
        """RECORD as path -> row, kept for :meth:`expected`; BadWheel on malformed, duplicate or dangling rows."""
        text = self.read_small(self.member("RECORD")).decode("utf-8", errors="replace")
        for fields in csv.reader(io.StringIO(text, newline="")):
            if len(fields) != 3 and fields:
                raise self.bad(f"RECORD: malformed line {','.join(fields)!r}")
            if fields and fields[0] in self.rows:
                raise self.bad(f"RECORD: lists {fields[0]} twice")
            if fields and fields[0] not in self.by_name:
                raise self.bad(f"{fields[0]}: listed in RECORD but not in the wheel")
            if fields:
                self.rows[fields[0]] = _Row(fields[1], fields[2])
        return self.rows

    def expected(self, member: str) -> _Row:
        """The member's RECORD row; BadWheel if it has none or no usable hash."""
        row = self.rows.get(member)
        if row is None:
            raise self.bad(f"{member}: not listed in RECORD")
        if row.digest.partition("=")[0] not in _HASHES:
            raise self.bad(f"{member}: RECORD hash {row.digest or '(none)'!r} is not sha256 or stronger")
        return row

    def raw_whole(self, info: zipfile.ZipInfo) -> bytes:
        """A small member's compressed bytes in one ``pread``."""
        return zipraw.read_at(self.f.fileno(), self.offsets[info.orig_filename], info.compress_size)

    def raw_at(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """As :meth:`raw`, read by ``pread``: safe from a worker thread while this thread reads on."""
        return zipraw.iter_raw_at(self.f.fileno(), self.offsets[info.orig_filename], info.compress_size)

    def checked_raw(self, info: zipfile.ZipInfo, raws: Iterable[bytes] | None = None) -> Iterator[bytes]:
        """The member's raw bytes (``raws``, default :meth:`raw`), passed through while their plain form is
        hashed and checked on the way."""
        row = self.expected(info.orig_filename)
        h = hashlib.new(row.digest.partition("=")[0])
        inflater = zipraw.Inflater(info)
        for raw in self.raw(info) if raws is None else raws:
            for plain in inflater.feed(raw):
                h.update(plain)
            yield raw
        for plain in inflater.finish():
            h.update(plain)
        self._compare(info, row, h)

    def _compare(self, info: zipfile.ZipInfo, row: _Row, h: hashlib._Hash) -> None:
        if (got := _digest_field(h)) != row.digest or row.size not in ("", str(info.file_size)):
            raise self.bad(
                f"{info.orig_filename}: RECORD says {row.digest} ({row.size or '?'} bytes), "
                f"member is {got} ({info.file_size} bytes)"
            )

    def _check_small(self, info: zipfile.ZipInfo) -> None:
        """:meth:`check` of a member of at most :data:`zipraw.CHUNK` bytes, raw and plain, read whole by pread."""
        row = self.expected(info.orig_filename)
        plain = zipraw.inflate_whole(info, self.raw_whole(info))
        self._compare(info, row, hashlib.new(row.digest.partition("=")[0], plain))

    def check(self, info: zipfile.ZipInfo) -> None:
        """Check one member against RECORD, streaming."""
        for _ in self.checked_raw(info):
            pass

    def check_batch(self, infos: list[zipfile.ZipInfo]) -> None:
        """Check members against RECORD from a worker thread (``pread``: this object's file position is untouched)."""
        for info in infos:
            if info.compress_size <= zipraw.CHUNK and info.file_size <= zipraw.CHUNK:
                self._check_small(info)
            else:
                for _ in self.checked_raw(info, self.raw_at(info)):
                    pass


class _Checks:
    """RECORD checks handed to a :class:`~librarian.pool.Pipeline` a batch of members at a time.

    Members go in batches (up to :data:`_BATCH` compressed bytes or :data:`_BATCH_MEMBERS` members), so a
    wheel of 16,000 cubins costs a few hundred submissions, not 16,000. Tiny members (under :data:`_INLINE`
    compressed bytes) are checked at once in the calling thread: their cost is Python's, under the GIL,
    and handing them to a thread would only add to it (70,000 of them ran slower on two threads than one).
    """

    def __init__(self, w: _Wheel, pipeline: Pipeline) -> None:
        self.w, self.pipeline = w, pipeline
        self.batch: list[zipfile.ZipInfo] = []
        self.size = 0

    def add(self, info: zipfile.ZipInfo) -> None:
        """Check ``info`` (its RECORD row is looked up now, so a missing row raises in member order)."""
        self.w.expected(info.orig_filename)
        if info.compress_size < _INLINE:
            try:
                self.w.check_batch([info])
            except (BadWheel, zipraw.ZipError):
                self.w.check_batch(self.batch)  # a member before it, not yet handed over, is the one to report
                raise
            return
        self.batch.append(info)
        self.size += info.compress_size
        if self.size >= _BATCH or len(self.batch) >= _BATCH_MEMBERS:
            self.flush()

    def flush(self) -> None:
        """Hand the batch so far to the pipeline."""
        if self.batch:
            batch, self.batch, self.size = self.batch, [], 0
            self.pipeline.submit(functools.partial(self.w.check_batch, batch))


def _parse_filename(path: Path) -> WheelName:
    try:
        return WheelName.parse(path.name)
    except BadInput as e:
        raise BadWheel(str(e)) from e


def _check_names(infos: list[zipfile.ZipInfo]) -> set[str]:
    """Check member names (safe, unique) and methods; return the top-level folders."""
    seen: set[str] = set()
    tops: set[str] = set()
    for info in infos:
        member = info.orig_filename
        if problem := zipraw.unsafe_name(member):
            raise BadWheel(f"{member!r}: {problem}")
        if member in seen:
            raise BadWheel(f"{member}: member appears twice")
        if info.flag_bits & 0x1 or info.compress_type not in zipraw.SUPPORTED_METHODS:
            raise BadWheel(f"{member}: encrypted or compressed with method {info.compress_type}")
        seen.add(member)
        if "/" in member:
            tops.add(member.split("/", 1)[0])
    return tops


def _check_layout(name: WheelName, infos: list[zipfile.ZipInfo]) -> str:
    """Check member names and return the one ``.dist-info`` folder, which must match the filename."""
    tops = _check_names(infos)
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(dist_infos) != 1:
        raise BadWheel(f"expected one .dist-info folder, found {len(dist_infos) or 'none'}")
    stem = dist_infos[0].removesuffix(".dist-info")
    dist, _, version = stem.rpartition("-")
    if canonicalize_name(dist) != canonicalize_name(name.distribution) or _version(version) != name.version:
        raise BadWheel(f"{dist_infos[0]} does not match the filename's {name.distribution} {name.version}")
    for top in tops:
        if top.endswith(".data") and top != f"{stem}.data":
            raise BadWheel(f"{top} does not match {dist_infos[0]}")
    return dist_infos[0]


# What zipfile raises on a crafted archive besides BadZipFile (all turned into one-line BadWheel errors).
_ZIP_FAILURES = (zipfile.BadZipFile, EOFError, struct.error, ValueError, OSError, NotImplementedError,
                 IndexError, KeyError, OverflowError)  # fmt: skip


@contextlib.contextmanager
def _open(path: Path, name: WheelName | None = None) -> Iterator[_Wheel]:
    """Open ``path`` as a checked wheel (named ``name``, default its filename); every failure to read it
    becomes a one-line BadWheel naming it."""
    try:
        f = open_regular(path)
    except OSError as e:
        raise BadWheel(f"{path}: cannot read ({e.strerror or e})") from e
    with f:
        try:
            zf = zipfile.ZipFile(f)
            w = _Wheel(path, f, zf, name)
        except BadWheel as e:
            raise e if str(e).startswith(f"{path}:") else BadWheel(f"{path}: {e}") from e
        except zipraw.ZipError as e:
            raise BadWheel(f"{path}: {e}") from e
        except _ZIP_FAILURES as e:
            # zipfile raises more than BadZipFile on crafted archives: negative seeks, short reads, a
            # "version needed" it does not know (NotImplementedError), names that are not UTF-8.
            detail = "" if str(e) == "File is not a zip file" else f" ({e})"
            raise BadWheel(f"{path}: not a zip file{detail}") from e
        with zf:
            try:
                yield w
            except zipraw.ZipError as e:
                raise BadWheel(f"{path}: {e}") from e


def read_wheel_info(path: Path, name: WheelName | None = None) -> WheelInfo:
    """Open ``path`` safely and read its names, METADATA, WHEEL tags and members (payload not inflated).

    ``name`` is the wheel's filename when the file has another (a download's temp name)."""
    with _open(path, name) as w:
        return _info(w)


def _info(w: _Wheel) -> WheelInfo:
    """What :func:`read_wheel_info` returns, from an open wheel."""
    meta_bytes, meta = w.headers("METADATA")
    _, wheel = w.headers("WHEEL")
    if not meta.get("Name") or not meta.get("Version"):
        raise w.bad(f"{w.dist_info}/METADATA: no Name or Version")
    members = tuple(
        Member(i.orig_filename, i.file_size, i.compress_size, (i.external_attr >> 16) & 0o7777,
               (i.external_attr >> 16) & 0o170000 == _S_IFLNK)
        for i in w.infos
    )
    requires = meta.get("Requires-Python")
    return WheelInfo(
        w.name, meta["Name"][0], meta["Version"][0], tuple(wheel.get("Tag", [])), w.dist_info, members,
        requires[0].strip() if requires else None, meta_bytes,
    )


def _unrecorded(member: str, dist_info: str) -> bool:
    """Members RECORD does not hash: itself, its signatures, folder entries."""
    return member.endswith("/") or member in {f"{dist_info}/{leaf}" for leaf in ("RECORD", *_SIGNATURES)}


def _jobs(jobs: int | None) -> int:
    """Threads for RECORD checks: ``jobs``, default the cores; one where there is no ``os.pread``."""
    return (jobs or default_jobs()) if hasattr(os, "pread") else 1


def verify_record(path: Path, *, jobs: int | None = None) -> None:
    """Check every member's sha256 and size against RECORD, streaming; BadWheel names the first liar.

    Members are inflated and hashed by ``jobs`` threads (default: the cores available); the first bad
    member in member order raises, as with one.
    """
    with _open(path) as w:
        _verify(w, jobs)


def _verify(w: _Wheel, jobs: int | None) -> None:
    w.read_record()
    recorded = [i for i in w.infos if not _unrecorded(i.orig_filename, w.dist_info)]
    if _jobs(jobs) <= 1:
        for info in recorded:
            w.check(info)
        return
    with Pipeline(_jobs(jobs), "record") as pipeline:
        checks = _Checks(w, pipeline)
        try:
            for info in recorded:
                checks.add(info)
            checks.flush()
        finally:
            pipeline.drain()  # an earlier member's failure is the one to report


def wheel_problems(path: Path, name: WheelName | None = None, *, jobs: int | None = None) -> tuple[list[str], str | None]:
    """:func:`metadata_problems`, and the first member RECORD lies about (:func:`verify_record`; ``None``:
    none), from one opening of the wheel; lines without the ``path: `` prefix. BadWheel if it cannot be read."""
    with _open(path, name) as w:
        problems = _metadata_problems(_info(w))
        try:
            _verify(w, jobs)
        except BadWheel as e:
            return problems, str(e).removeprefix(f"{path}: ")
        except zipraw.ZipError as e:
            return problems, str(e)
        return problems, None


def metadata_problems(path: Path, name: WheelName | None = None) -> list[str]:
    """Each way METADATA, WHEEL and the ``.dist-info`` name contradict the filename (``name``, default
    the file's own); a wheel that cannot be read at all (no WHEEL, say) raises BadWheel."""
    return _metadata_problems(read_wheel_info(path, name))


def _metadata_problems(info: WheelInfo) -> list[str]:
    name = info.filename
    problems = list(info.mismatches())
    expected = f"{name.distribution}-{name.version}.dist-info"
    if info.dist_info != expected:
        problems.append(f"its .dist-info is {info.dist_info}, expected {expected}")
    return problems


def check_publishable(path: Path) -> WheelInfo:
    """Refuse (BadWheel) a wheel that ``verify`` would flag for its metadata; warn of symlink members.

    Publish runs the very checks verify runs, so that nothing is stored that verify then rejects.
    Returns what was read (:func:`read_wheel_info`), so the caller need not open the wheel again.
    """
    info = read_wheel_info(path)
    problems = _metadata_problems(info)
    if problems:
        raise BadWheel(f"{path}: {problems[0]}")
    if links := [m.path for m in info.members if m.link]:
        log.warning("%s: %d member(s) are symbolic links (%s); pip installs them as plain files",
                    path, len(links), links[0])  # fmt: skip
    return info


def check_archive(path: Path) -> None:
    """Open ``path`` as a zip with every structural check (names, local headers, overlaps); BadWheel if not.

    For readers built on :mod:`zipfile` alone (inspect, doctor): run first, it turns a crafted archive
    into one line, which names the file as those readers do (``wheel.whl: ...``).
    """
    label = path.name
    try:
        f = open_regular(path)
    except OSError as e:
        raise BadWheel(f"{label}: cannot read ({e.strerror or e})") from e
    with f:
        try:
            with zipfile.ZipFile(f) as zf:
                infos = zf.infolist()
                _check_names(infos)
                zipraw.data_offsets(f, infos)
        except BadWheel as e:
            raise BadWheel(f"{label}: {e}") from e
        except _ZIP_FAILURES as e:
            raise BadWheel(f"{label}: not a readable zip ({e})") from e


def check_wheel_identity(path: Path, entry: IndexEntry) -> None:
    """Refuse (BadWheel) a fetched wheel that is not the one its index entry's cell and filename name.

    The sha256 only proves the bytes are the ones the entry points at; an entry of one package may point
    at another's wheel. The entry must agree with itself, and the wheel's METADATA with the entry.
    """
    problems = entry_problems(entry)
    try:
        problems = problems or metadata_problems(path, entry.name)
    except BadWheel as e:
        problems = [str(e).removeprefix(f"{path}: ")]
    if problems:
        raise BadWheel(f"{entry.path}: {problems[0]}; refused")
