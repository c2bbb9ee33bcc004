"""Checking a wheel's RECORD: every member's hash and size against its line, streaming, on a pool of threads.

Reading the wheel (names, METADATA, WHEEL) is :mod:`librarian.wheel.wheelfile`; this module reads RECORD and
inflates members to hash them, in bounded chunks (:mod:`librarian.wheel.zipraw`).
RECORD: https://packaging.python.org/en/latest/specifications/recording-installed-packages/#the-record-file
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import io
import zipfile
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from librarian.errors import BadWheel
from librarian.pool import Pipeline, jobs_for
from librarian.wheel import zipraw
from librarian.wheel.wheelfile import SIGNATURES, OpenWheel, open_wheel

# PEP 376 / the wheel spec allow sha256 or stronger; md5 and sha1 are refused.
_HASHES = ("sha256", "sha384", "sha512")
_BATCH = 4 << 20  # compressed bytes of small members checked as one piece of work on a thread
_BATCH_MEMBERS = 256
_INLINE = 16 << 10  # compressed bytes under which a member is checked in the calling thread


def digest_field(h: hashlib._Hash) -> str:
    """A RECORD hash field: ``sha256=<urlsafe base64, no padding>``."""
    return f"{h.name}={base64.urlsafe_b64encode(h.digest()).rstrip(b'=').decode()}"


class Row(NamedTuple):
    """One RECORD line: the hash field (``algo=b64`` or empty) and the size field (or empty); a tuple, as
    RECORD of 70,000 lines makes 70,000 of them."""

    digest: str
    size: str


class Record:
    """An open wheel's RECORD, read once, and the checks of its members against it."""

    def __init__(self, w: OpenWheel) -> None:
        self.w = w
        self.rows = self._read()

    def _read(self) -> dict[str, Row]:
        """RECORD as path -> row; BadWheel on malformed, duplicate or dangling rows."""
        w = self.w
        text = w.read_small(w.member("RECORD")).decode("utf-8", errors="replace")
        rows: dict[str, Row] = {}
        reader = csv.reader(io.StringIO(text, newline=""))
        while True:
            try:
                fields = next(reader, None)
            except csv.Error as e:  # a field past csv's limit (131,072): no zip member name is that long
                raise w.bad(f"RECORD: malformed line {reader.line_num}: {e}") from e
            if fields is None:
                break
            if not fields:
                continue
            if len(fields) != 3:
                raise w.bad(f"RECORD: malformed line {','.join(fields)!r}")
            if fields[0] in rows:
                raise w.bad(f"RECORD: lists {fields[0]} twice")
            if fields[0] not in w.by_name:
                raise w.bad(f"{fields[0]}: listed in RECORD but not in the wheel")
            rows[fields[0]] = Row(fields[1], fields[2])
        return rows

    def expected(self, member: str) -> Row:
        """The member's RECORD row; BadWheel if it has none or no usable hash."""
        row = self.rows.get(member)
        if row is None:
            raise self.w.bad(f"{member}: not listed in RECORD")
        if row.digest.partition("=")[0] not in _HASHES:
            raise self.w.bad(f"{member}: RECORD hash {row.digest or '(none)'!r} is not sha256 or stronger")
        return row

    def checked_plain(self, info: zipfile.ZipInfo, raws: Iterable[bytes] | None = None) -> Iterator[bytes]:
        """The member's plain bytes in bounded chunks from ``raws`` (default: read by ``pread``), hashed on the
        way; after the last one, BadWheel if RECORD disagrees."""
        return self._checked(info, self.w.raw_at(info) if raws is None else raws, plain=True)

    def checked_raw(self, info: zipfile.ZipInfo, raws: Iterable[bytes] | None = None) -> Iterator[bytes]:
        """The member's raw bytes (``raws``, default :meth:`OpenWheel.raw`), passed through while their plain form
        is hashed and checked on the way."""
        return self._checked(info, self.w.raw(info) if raws is None else raws, plain=False)

    def _checked(self, info: zipfile.ZipInfo, raws: Iterable[bytes], *, plain: bool) -> Iterator[bytes]:
        """``raws`` inflated and hashed; yields the plain chunks (``plain``) or the raw ones; then compares."""
        row = self.expected(info.orig_filename)
        h = hashlib.new(row.digest.partition("=")[0])
        inflater = zipraw.Inflater(info)
        for raw in raws:
            for chunk in inflater.feed(raw):
                h.update(chunk)
                if plain:
                    yield chunk
            if not plain:
                yield raw
        for chunk in inflater.finish():
            h.update(chunk)
            if plain:
                yield chunk
        self._compare(info, row, h)

    def _compare(self, info: zipfile.ZipInfo, row: Row, h: hashlib._Hash) -> None:
        if (got := digest_field(h)) != row.digest or row.size not in ("", str(info.file_size)):
            raise self.w.bad(
                f"{info.orig_filename}: RECORD says {row.digest} ({row.size or '?'} bytes), "
                f"member is {got} ({info.file_size} bytes)"
            )

    def check_small(self, info: zipfile.ZipInfo, raw: bytes) -> None:
        """:meth:`check` of a member of at most :data:`zipraw.CHUNK` bytes, raw and plain, from its raw bytes."""
        row = self.expected(info.orig_filename)
        plain = zipraw.inflate_whole(info, raw)
        algo = row.digest.partition("=")[0]
        self._compare(info, row, hashlib.sha256(plain) if algo == "sha256" else hashlib.new(algo, plain))

    def check(self, info: zipfile.ZipInfo, raws: Iterable[bytes] | None = None) -> None:
        """Check one member against RECORD, streaming its raw bytes from ``raws`` (default :meth:`OpenWheel.raw`)."""
        for _ in self.checked_raw(info, raws):
            pass

    def check_batch(self, infos: list[zipfile.ZipInfo]) -> None:
        """Check members against RECORD from a worker thread (``pread``: the file position is untouched)."""
        for info in infos:
            if small(info):
                self.check_small(info, self.w.raw_whole(info))
            else:
                self.check(info, self.w.raw_at(info))


def small(info: zipfile.ZipInfo) -> bool:
    """Whether a member is read and inflated whole (at most :data:`zipraw.CHUNK` bytes, raw and plain)."""
    return info.compress_size <= zipraw.CHUNK and info.file_size <= zipraw.CHUNK


class Checks:
    """RECORD checks handed to a :class:`~librarian.pool.Pipeline` a batch of members at a time.

    Members go in batches (up to :data:`_BATCH` compressed bytes or :data:`_BATCH_MEMBERS` members), so a
    wheel of 16,000 cubins costs a few hundred submissions, not 16,000. Tiny members (under :data:`_INLINE`
    compressed bytes) are checked at once in the calling thread: their cost is Python's, under the GIL,
    and handing them to a thread would only add to it (70,000 of them ran slower on two threads than one).
    """

    def __init__(self, record: Record, pipeline: Pipeline) -> None:
        self.record, self.pipeline = record, pipeline
        self.batch: list[zipfile.ZipInfo] = []
        self.size = 0

    def add(self, info: zipfile.ZipInfo, raw: bytes | None = None) -> None:
        """Check ``info`` (its RECORD row is looked up now, so a missing row raises in member order);
        ``raw``: its compressed bytes, where the caller has read them already."""
        self.record.expected(info.orig_filename)
        if info.compress_size < _INLINE:
            try:
                if raw is not None and small(info):
                    self.record.check_small(info, raw)
                else:
                    self.record.check_batch([info])
            except (BadWheel, zipraw.ZipError):
                # A member before it, not yet handed over, is the one to report.
                self.record.check_batch(self.batch)
                raise
            return
        self.batch.append(info)
        self.size += info.compress_size
        if self.size >= _BATCH or len(self.batch) >= _BATCH_MEMBERS:
            self.flush()

    def submit(self, work: functools.partial[None]) -> None:
        """Hand the batch so far, then ``work`` (about a later member), to the pipeline, in that order."""
        self.flush()
        self.pipeline.submit(work)

    def flush(self) -> None:
        """Hand the batch so far to the pipeline."""
        if self.batch:
            batch, self.batch, self.size = self.batch, [], 0
            self.pipeline.submit(functools.partial(self.record.check_batch, batch))


def unrecorded(member: str, dist_info: str) -> bool:
    """Members RECORD does not hash: itself, its signatures, folder entries."""
    return member.endswith("/") or member in _unhashed(dist_info)


@functools.lru_cache(maxsize=16)
def _unhashed(dist_info: str) -> frozenset[str]:
    return frozenset(f"{dist_info}/{leaf}" for leaf in ("RECORD", *SIGNATURES))


def verify_record(path: Path, *, jobs: int | None = None) -> None:
    """Check every member's sha256 and size against RECORD, streaming; BadWheel names the first liar.

    Members are inflated and hashed by ``jobs`` threads (default: the cores available); the first bad
    member in member order raises, as with one.
    """
    with open_wheel(path) as w:
        check_all(Record(w), jobs)


def check_all(
    record: Record,
    jobs: int | None,
    natives: Collection[str] = (),
    inspect: Callable[[zipfile.ZipInfo], None] | None = None,
) -> None:
    """Check every recorded member of ``record``'s wheel; the first liar in member order raises.

    ``inspect``: what checks (and reads) each member named in ``natives`` instead, on the same threads
    (a deep read inspects them as it hashes them); the member's RECORD row is looked up first, in order.
    """
    w = record.w
    recorded = [i for i in w.infos if not unrecorded(i.orig_filename, w.dist_info)]
    if jobs_for(jobs) <= 1:
        for info in recorded:
            if inspect is not None and info.orig_filename in natives:
                inspect(info)
            else:
                record.check(info)
        return
    with Pipeline(jobs_for(jobs), "record") as pipeline:
        checks = Checks(record, pipeline)
        try:
            for info in recorded:
                if inspect is not None and info.orig_filename in natives:
                    record.expected(info.orig_filename)  # a missing row raises in member order
                    checks.submit(functools.partial(inspect, info))
                else:
                    checks.add(info)
            checks.flush()
        finally:
            pipeline.drain()  # an earlier member's failure is the one to report
