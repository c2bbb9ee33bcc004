"""The one raw rewriter of a wheel: a :class:`RewritePlan` (its new version, the members it replaces, the
members it adds to the ``.dist-info``) applied by :func:`write_rewrite`, which owns RECORD.

Every member the plan does not replace is copied as its compressed bytes, never recompressed, with its
permissions, under the ``.dist-info``/``.data`` names of the new version; signatures (``RECORD.jws``,
``RECORD.p7s``) are dropped, as they sign the old RECORD; added members are written just before RECORD and
get a row in it. The relabel (:mod:`librarian.wheel.relabel`) and the variant wheel
(:mod:`librarian.wheel.variant`) are two plans of it.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import logging
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from librarian import progress
from librarian.coords import WheelName
from librarian.wheel import zipwriter
from librarian.wheel.deep import Inspector
from librarian.wheel.record import Checks, Record, Row, digest_field, small, unrecorded
from librarian.wheel.wheelfile import SIGNATURES, OpenWheel

log = logging.getLogger(__name__)


def metadata_with_version(w: OpenWheel, metadata: bytes, version: str) -> bytes:
    """METADATA with its ``Version:`` header replaced, every other byte kept."""
    # The headers end at the first blank line; the body (the long description) is left alone.
    end = m.end() if (m := re.search(rb"\r?\n\r?\n", metadata)) else len(metadata)
    head, count = re.subn(
        rb"(?mi)^Version:[ \t]*[^\r\n]*", b"Version: " + version.encode(), metadata[:end], count=1
    )
    if not count:
        raise w.bad(f"{w.dist_info}/METADATA: no Version header")
    return head + metadata[end:]


def wheel_with_tags(wheel: bytes, name: WheelName) -> bytes:
    """WHEEL with its ``Tag:`` lines replaced by the filename's tags (one a line, as bdist_wheel writes them)."""
    lines = [line for line in wheel.decode("utf-8").splitlines() if not line.lower().startswith("tag:")]
    while lines and not lines[-1].strip():
        lines.pop()
    return ("\n".join(lines + [f"Tag: {t}" for t in sorted(str(t) for t in name.tags)]) + "\n").encode(
        "utf-8"
    )


def is_signature(w: OpenWheel, member: str) -> bool:
    """Whether ``member`` signs the wheel's RECORD (and so is dropped by any rewrite)."""
    return member.startswith(f"{w.dist_info}/") and member.rpartition("/")[2] in SIGNATURES


@dataclass(frozen=True, slots=True)
class RewritePlan:
    """What a rewrite changes: the ``version`` the ``.dist-info`` and ``.data`` folders are renamed to, the
    members (by their names in the source) whose bytes are ``replaced``, and the members ``added`` to the new
    ``.dist-info`` (by their names inside it). RECORD is the rewriter's own: never in either."""

    version: str
    replaced: Mapping[str, bytes]
    added: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BoundRewrite:
    """A plan against one open wheel: its renames and its new RECORD, worked out once."""

    w: OpenWheel
    plan: RewritePlan
    renames: Mapping[str, str]
    record_text: bytes

    @property
    def new_dist_info(self) -> str:
        return self.renames[self.w.dist_info]

    def renamed(self, member: str) -> str:
        """``member``'s name in the new wheel."""
        return renamed(member, self.renames)

    def added_members(self) -> list[tuple[str, bytes]]:
        return [(f"{self.new_dist_info}/{name}", data) for name, data in sorted(self.plan.added.items())]


def renames_for(w: OpenWheel, version: str) -> dict[str, str]:
    """The ``.dist-info`` and ``.data`` folders' new names at ``version``."""
    stem = f"{w.data_dir.rpartition('-')[0]}-{version}"
    return {w.dist_info: f"{stem}.dist-info", w.data_dir: f"{stem}.data"}


def renamed(member: str, renames: Mapping[str, str]) -> str:
    """A member's name under ``renames`` (its top folder renamed, if it is one of them)."""
    top, sep, rest = member.partition("/")
    return renames.get(top, top) + sep + rest


def bind(w: OpenWheel, record: Record, plan: RewritePlan) -> BoundRewrite:
    """``plan`` against ``w``: the renames and the new RECORD (renamed rows, the replaced members' new hashes
    and sizes, a row per added member; signatures' rows dropped; RECORD's own row empty, as it was)."""
    renames = renames_for(w, plan.version)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    record_member = f"{w.dist_info}/RECORD"
    added = [(f"{renames[w.dist_info]}/{n}", d) for n, d in sorted(plan.added.items())]
    for path, row in record.rows.items():
        if is_signature(w, path):
            continue
        if path == record_member:  # the added members' rows go before RECORD's own, as the members do
            for name, data in added:
                writer.writerow([name, digest_field(hashlib.sha256(data)), str(len(data))])
        if (new := plan.replaced.get(path)) is not None:
            algorithm = row.digest.partition("=")[0] or "sha256"
            row = Row(digest_field(hashlib.new(algorithm, new)), str(len(new)))
        writer.writerow([renamed(path, renames), row.digest, row.size])
    if record_member not in record.rows:
        for name, data in added:
            writer.writerow([name, digest_field(hashlib.sha256(data)), str(len(data))])
    return BoundRewrite(w, plan, renames, out.getvalue().encode())


class Hashing:
    """A file being written whose bytes are hashed and counted on the way: the new wheel's sha256 and size
    without reading it back. ``out`` ``None``: the bytes go nowhere (a dry run measures the wheel it would
    write)."""

    def __init__(self, out: BinaryIO | None, digest: bool = True) -> None:
        self.out, self.digest, self.size = out, hashlib.sha256() if digest else None, 0

    def write(self, data: bytes) -> int:
        if self.digest is not None:
            self.digest.update(data)
        self.size += len(data)
        return len(data) if self.out is None else self.out.write(data)


def _add_members(rewrite: BoundRewrite, writer: zipwriter.RawZipWriter, like: zipfile.ZipInfo) -> None:
    for name, data in rewrite.added_members():
        info = zipfile.ZipInfo(name, date_time=like.date_time)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        writer.add_bytes(info, data)


def write_rewrite(
    rewrite: BoundRewrite,
    record: Record,
    writer: zipwriter.RawZipWriter,
    verify: bool | Checks,
    bar: progress.Task,
    inspector: Inspector | None = None,
) -> None:
    """Every member of the wheel in order, renamed; replaced ones rewritten, RECORD the plan's, added ones
    before it, the rest copied raw.

    ``verify``: check RECORD on the way (``True``: in this thread; a :class:`Checks`: on its threads);
    ``inspector``: native members are checked by it instead, which inspects the same plain bytes.
    """
    w = record.w
    record_member = f"{w.dist_info}/RECORD"
    replaced = {**rewrite.plan.replaced, record_member: rewrite.record_text}
    for info in w.infos:
        member = info.orig_filename
        new_member = rewrite.renamed(member)
        if inspector is not None and member in inspector.names and member not in replaced:
            record.expected(member)  # a missing row raises in member order
            if isinstance(verify, Checks):
                verify.submit(functools.partial(inspector, info))
            else:
                inspector(info)
            writer.add_raw(info, progress.counted(w.raw(info), bar), name=new_member)
        elif member in replaced:
            if member == record_member:
                _add_members(rewrite, writer, w.member("METADATA"))
            writer.add_bytes(info, replaced[member], name=new_member)
            bar.advance(info.compress_size)
        elif is_signature(w, member):
            log.warning("%s: dropping %s, which signs the old RECORD", w.path, member)
        elif unrecorded(member, w.dist_info):
            writer.add_raw(info, progress.counted(w.raw(info), bar), name=new_member)
        elif verify and small(info):
            raw = w.raw_whole(info)  # one pread, no generator: 70,000 small members add up
            if isinstance(verify, Checks):
                verify.add(info, raw)  # the same bytes are checked and copied
            else:
                record.check_small(info, raw)
            writer.add_raw(info, [raw], name=new_member)
            bar.advance(info.compress_size)
        elif isinstance(verify, Checks):
            verify.add(info)
            writer.add_raw(info, progress.counted(w.raw(info), bar), name=new_member)
        elif verify:
            writer.add_raw(info, progress.counted(record.checked_raw(info), bar), name=new_member)
        else:
            record.expected(member)
            writer.add_raw(info, progress.counted(w.raw(info), bar), name=new_member)
    if isinstance(verify, Checks):
        verify.flush()
    writer.close()


__all__ = [
    "BoundRewrite",
    "Hashing",
    "RewritePlan",
    "bind",
    "is_signature",
    "metadata_with_version",
    "renamed",
    "renames_for",
    "wheel_with_tags",
    "write_rewrite",
]
