"""Reading a wheel: open it safely (names, layout, local headers), read METADATA and WHEEL, check what it claims.

Every member is streamed in bounded chunks (:mod:`librarian.wheel.zipraw`), so memory does not grow with the
wheel. Checking RECORD is :mod:`librarian.wheel.record`; rewriting a wheel is :mod:`librarian.wheel.relabel`.
Wheel format: https://packaging.python.org/en/latest/specifications/binary-distribution-format/
"""

from __future__ import annotations

import contextlib
import logging
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import BinaryIO

from packaging.utils import canonicalize_name
from packaging.version import Version

from librarian import safeio
from librarian.coords import WheelName, version_of
from librarian.demands import Said, said_claims
from librarian.errors import BadInput, BadWheel
from librarian.safeio import open_regular
from librarian.wheel import zipraw

log = logging.getLogger(__name__)

# METADATA, WHEEL and RECORD are read whole; past these sizes a file is not one we want to parse (a
# 63 MB METADATA in a 72 KB wheel once cost 745 MB of memory). Real ones: METADATA < 1 MB (with a long
# README), WHEEL < 1 KB, RECORD ~120 bytes per member.
_SMALL_LIMITS = {"METADATA": 8 << 20, "WHEEL": 1 << 20, "RECORD": 32 << 20}
_SMALL_LIMIT = 8 << 20  # any other file read whole
# RECORD.jws / RECORD.p7s sign the old RECORD: carried over they would be stale, so retag drops them.
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
_S_IFLNK = 0o120000  # a member's unix file type (external_attr >> 16) for a symbolic link


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
    requires_torch: str | None = None  # the specifier of its unconditional Requires-Dist on torch (">=2.10")

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
        return tuple(str(c) for c in said_claims(self.filename, said_of(self)))


def said_of(info: WheelInfo) -> Said:
    """What a wheel's METADATA and WHEEL say of it, for the claims."""
    return Said(info.metadata_name, info.metadata_version, info.wheel_tags)


sha256_file = safeio.sha256_file  # the one file hash (1 MiB reads, as zipraw.CHUNK), importable from here too


class OpenWheel:
    """An open wheel whose structure has been checked: names, one matching dist-info, local headers."""

    def __init__(
        self,
        path: Path,
        f: BinaryIO,
        infos: list[zipfile.ZipInfo],
        name: WheelName | None = None,
        offsets: dict[str, int] | None = None,
    ) -> None:
        self.path, self.f = path, f
        self.name = parse_filename(path) if name is None else name
        self.infos = infos
        self.dist_info = _check_layout(self.name, self.infos)
        self.data_dir = self.dist_info.removesuffix(".dist-info") + ".data"
        self.by_name = {i.orig_filename: i for i in self.infos}
        self.offsets = zipraw.data_offsets(f, self.infos) if offsets is None else offsets

    def directory(self) -> zipraw.Directory:
        """Its members and data offsets, checked: for a second open of the same file not to parse them again
        (:func:`open_wheel`'s ``directory``; 70,000 members take a second)."""
        return zipraw.Directory(self.infos, self.offsets)

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
            raise self.bad(
                f"{info.orig_filename}: {info.file_size} bytes, over the {limit}-byte limit for a metadata file"
            )
        return b"".join(self.plain(info))

    def headers(self, leaf: str) -> tuple[bytes, dict[str, list[str]]]:
        """A dist-info email-header file (METADATA, WHEEL): its bytes and its headers."""
        data = self.read_small(self.member(leaf))
        return data, _headers(data, self.path, f"{self.dist_info}/{leaf}")

    def metadata_of(self, version: Version) -> tuple[bytes, dict[str, list[str]]]:
        """METADATA (bytes and headers), its ``Version`` held to ``version`` (the filename's): the one check
        every rewrite of a wheel makes before it changes a byte; BadWheel naming both otherwise."""
        metadata, headers = self.headers("METADATA")
        if version_of(headers.get("Version", [""])[0]) != version:
            raise self.bad(
                f"{self.dist_info}/METADATA: Version {headers.get('Version')} does not match the filename"
            )
        return metadata, headers

    def raw_whole(self, info: zipfile.ZipInfo) -> bytes:
        """A small member's compressed bytes in one ``pread``."""
        return zipraw.read_at(self.f.fileno(), self.offsets[info.orig_filename], info.compress_size)

    def raw_at(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """As :meth:`raw`, read by ``pread``: safe from a worker thread while this thread reads on."""
        return zipraw.iter_raw_at(self.f.fileno(), self.offsets[info.orig_filename], info.compress_size)


def parse_filename(path: Path) -> WheelName:
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
        top, sep, _ = member.partition("/")
        if sep:
            tops.add(top)
    return tops


def _check_layout(name: WheelName, infos: list[zipfile.ZipInfo]) -> str:
    """Check member names and return the one ``.dist-info`` folder, which must match the filename."""
    tops = _check_names(infos)
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(dist_infos) != 1:
        raise BadWheel(f"expected one .dist-info folder, found {len(dist_infos) or 'none'}")
    stem = dist_infos[0].removesuffix(".dist-info")
    dist, _, version = stem.rpartition("-")
    if canonicalize_name(dist) != canonicalize_name(name.distribution) or version_of(version) != name.version:
        raise BadWheel(f"{dist_infos[0]} does not match the filename's {name.distribution} {name.version}")
    for top in tops:
        if top.endswith(".data") and top != f"{stem}.data":
            raise BadWheel(f"{top} does not match {dist_infos[0]}")
    return dist_infos[0]


# What zipfile raises on a crafted archive besides BadZipFile (all turned into one-line BadWheel errors).
_ZIP_FAILURES = (
    zipfile.BadZipFile,
    EOFError,
    struct.error,
    ValueError,
    OSError,
    NotImplementedError,
    IndexError,
    KeyError,
    OverflowError,
)


@contextlib.contextmanager
def open_wheel(
    path: Path, name: WheelName | None = None, directory: zipraw.Directory | None = None
) -> Iterator[OpenWheel]:
    """Open ``path`` as a checked wheel (named ``name``, default its filename); every failure to read it
    becomes a one-line BadWheel naming it.

    ``directory``: its members and data offsets as the code that has just written the file knows them
    (:meth:`~librarian.wheel.zipwriter.RawZipWriter.directory`: retag's output in publish's staging folder),
    taken as they are, not read back (70,000 members: half a second); names and layout are still checked.
    """
    try:
        f = open_regular(path)
    except OSError as e:
        raise BadWheel(f"{path}: cannot read ({e.strerror or e})") from e
    zf: zipfile.ZipFile | None = None
    with f:
        try:
            if directory is None:
                zf = zipfile.ZipFile(f)
                w = OpenWheel(path, f, zf.infolist(), name)
            else:
                w = OpenWheel(path, f, directory.infos, name, directory.offsets)
        except BadWheel as e:
            raise e if str(e).startswith(f"{path}:") else BadWheel(f"{path}: {e}") from e
        except zipraw.ZipError as e:
            raise BadWheel(f"{path}: {e}") from e
        except _ZIP_FAILURES as e:
            # zipfile raises more than BadZipFile on crafted archives: negative seeks, short reads, a
            # "version needed" it does not know (NotImplementedError), names that are not UTF-8.
            detail = "" if str(e) == "File is not a zip file" else f" ({e})"
            raise BadWheel(f"{path}: not a zip file{detail}") from e
        try:
            yield w
        except zipraw.ZipError as e:
            raise BadWheel(f"{path}: {e}") from e
        finally:
            if zf is not None:
                zf.close()


def read_wheel_info(
    path: Path, name: WheelName | None = None, directory: zipraw.Directory | None = None
) -> WheelInfo:
    """Open ``path`` safely and read its names, METADATA, WHEEL tags and members (payload not inflated).

    ``name`` is the wheel's filename when the file has another (a download's temp name); ``directory``
    as for :func:`open_wheel` (not parsed again)."""
    with open_wheel(path, name, directory) as w:
        return info_of(w)


def _headers(data: bytes, path: Path, member: str) -> dict[str, list[str]]:
    """The headers of an email-header file (METADATA, WHEEL); BadWheel naming ``path`` if not UTF-8."""
    try:
        msg = HeaderParser().parsestr(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BadWheel(f"{path}: {member}: not UTF-8 ({e})") from e
    return {k: [str(v) for v in msg.get_all(k, [])] for k in msg}


def info_of(w: OpenWheel) -> WheelInfo:
    """What :func:`read_wheel_info` returns, from an open wheel."""
    meta_bytes, meta = w.headers("METADATA")
    _, wheel = w.headers("WHEEL")
    return _info(w.path, w.name, w.dist_info, w.infos, meta_bytes, meta, wheel)


def info_of_written(
    path: Path, name: WheelName, infos: list[zipfile.ZipInfo], metadata: bytes, wheel: bytes
) -> WheelInfo:
    """What :func:`read_wheel_info` would read from a wheel just written (``path``, which need not exist:
    a dry run writes none) from what its writer knows: its members and the METADATA and WHEEL it wrote.
    Names and layout are checked as :func:`open_wheel` checks them."""
    try:
        dist_info = _check_layout(name, infos)
    except BadWheel as e:
        raise BadWheel(f"{path}: {e}") from e
    meta = _headers(metadata, path, f"{dist_info}/METADATA")
    return _info(path, name, dist_info, infos, metadata, meta, _headers(wheel, path, f"{dist_info}/WHEEL"))


def _info(
    path: Path,
    name: WheelName,
    dist_info: str,
    infos: list[zipfile.ZipInfo],
    meta_bytes: bytes,
    meta: dict[str, list[str]],
    wheel: dict[str, list[str]],
) -> WheelInfo:
    if not meta.get("Name") or not meta.get("Version"):
        raise BadWheel(f"{path}: {dist_info}/METADATA: no Name or Version")
    members = tuple(
        Member(
            i.orig_filename,
            i.file_size,
            i.compress_size,
            (i.external_attr >> 16) & 0o7777,
            (i.external_attr >> 16) & 0o170000 == _S_IFLNK,
        )
        for i in infos
    )
    requires = meta.get("Requires-Python")
    return WheelInfo(
        name,
        meta["Name"][0],
        meta["Version"][0],
        tuple(wheel.get("Tag", [])),
        dist_info,
        members,
        requires[0].strip() if requires else None,
        meta_bytes,
        torch_requirement(meta.get("Requires-Dist", [])),
    )


def torch_requirement(requires_dist: list[str]) -> str | None:
    """The specifier of a wheel's ``Requires-Dist: torch ...`` that holds whatever extras are asked (no
    ``extra ==`` marker); ``None`` where there is none, or none that pins a version."""
    if not any("torch" in line.lower() for line in requires_dist):
        return None  # the usual case: no requirement grammar loaded (pull checks every fetched METADATA)
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch" or not str(req.specifier):
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        return str(req.specifier)
    return None


def check_archive(path: Path) -> zipraw.Directory:
    """Open ``path`` as a zip with every structural check (names, local headers, overlaps); BadWheel if not.

    For readers built on :mod:`zipfile` alone (inspect, doctor): run first, it turns a crafted archive
    into one line, which names the file as those readers do (``wheel.whl: ...``). Returns the members
    and data offsets it read, for the reader to take (:func:`~librarian.wheel.members.inspect_wheel`).
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
                return zipraw.Directory(infos, zipraw.data_offsets(f, infos))
        except BadWheel as e:
            raise BadWheel(f"{label}: {e}") from e
        except _ZIP_FAILURES as e:
            raise BadWheel(f"{label}: not a readable zip ({e})") from e
