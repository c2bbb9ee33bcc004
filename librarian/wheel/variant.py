"""The variant wheel of a stored wheel (PEP 825): the same members, raw, under the public version, plus a
``variant.json``; and the check that a variant wheel is exactly that.

Written as the relabel writes (every member's compressed bytes copied, never recompressed); only
METADATA's ``Version``, the ``.dist-info``/``.data`` names and RECORD change, and one member is added.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from librarian import progress
from librarian.errors import BadInput
from librarian.safeio import atomic_output
from librarian.variant_format import VARIANT_JSON
from librarian.wheel import zipwriter
from librarian.wheel.record import Record, digest_field
from librarian.wheel.rewrite import (
    Hashing,
    RewritePlan,
    bind,
    is_signature,
    metadata_with_version,
    renamed,
    renames_for,
    write_rewrite,
)
from librarian.wheel.wheelfile import SIGNATURES, OpenWheel, open_wheel, parse_filename


@dataclass(frozen=True, slots=True)
class Written:
    """The variant wheel written: where, its sha256 and size (hashed as written)."""

    path: Path
    sha256: str
    size: int


def _checked_metadata(w: OpenWheel) -> bytes:
    """METADATA, its Version checked against the filename; a variant wheel refused as a source."""
    metadata, _ = w.metadata_of(parse_filename(w.path).version)
    if any(i.orig_filename == f"{w.dist_info}/{VARIANT_JSON}" for i in w.infos):
        raise w.bad(f"already a variant wheel ({w.dist_info}/{VARIANT_JSON})")
    return metadata


def _plan(w: OpenWheel, public: str) -> RewritePlan:
    metadata = _checked_metadata(w)
    return RewritePlan(
        public, {w.member("METADATA").orig_filename: metadata_with_version(w, metadata, public)}
    )


def _digest(w: OpenWheel, plan: RewritePlan, record: Record) -> str:
    renames = renames_for(w, plan.version)
    skip = {f"{w.dist_info}/RECORD", *plan.replaced}
    rows = sorted(
        f"{renamed(path, renames)},{row.digest}"
        for path, row in record.rows.items()
        if path not in skip and not is_signature(w, path)
    )
    h = hashlib.sha256()
    for line in rows:
        h.update(line.encode() + b"\n")
    for data in plan.replaced.values():
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def build_digest(src: Path) -> str:
    """The hex digest of what the variant of ``src`` holds besides its ``variant.json``: each member's RECORD
    hash under its renamed path and the rewritten METADATA. The same build filed under several labels (a
    torch-free wheel under two torch lines) has one digest; two builds of a release have two."""
    with open_wheel(src) as w:
        return _digest(w, _plan(w, str(parse_filename(src).version.public)), Record(w))


def write_variant(src: Path, out_dir: Path, named: Callable[[str], tuple[str, bytes]]) -> Written:
    """Write the variant of ``src`` into ``out_dir``: one plan of the raw rewriter (the public version,
    METADATA's Version, ``variant.json`` added); ``named`` gives its filename and ``variant.json`` from the
    build's digest (:func:`build_digest`, worked out on the same open). ``src`` is untouched."""
    public = str(parse_filename(src).version.public)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open_wheel(src) as w:
        plan = _plan(w, public)
        record = Record(w)
        filename, variant_json = named(_digest(w, plan, record))
        dest = out_dir / filename
        rewrite = bind(w, record, RewritePlan(plan.version, plan.replaced, {VARIANT_JSON: variant_json}))
        with (
            atomic_output(dest) as out,
            progress.task(f"variant {filename}", total=src.stat().st_size) as bar,
        ):
            hashing = Hashing(out)
            writer = zipwriter.RawZipWriter(hashing)  # type: ignore[arg-type]  # it only writes
            write_rewrite(rewrite, record, writer, False, bar)
    assert hashing.digest is not None
    return Written(dest, hashing.digest.hexdigest(), hashing.size)


def _data_problems(
    s: OpenWheel, v: zipfile.ZipFile, renames: dict[str, str], changed: set[str], present: set[str]
) -> list[str]:
    """Each member's data read (streamed) and hashed against the source's RECORD row: a byte changed under
    an unchanged local and central header (CRC and size copied) is found here, not by the headers."""
    rows = Record(s).rows
    problems = []
    for info in s.infos:
        member = info.orig_filename
        new = renamed(member, renames)
        row = rows.get(member)
        if member in changed or new not in present or row is None or not row.digest.startswith("sha256="):
            continue
        h = hashlib.sha256()
        try:
            with v.open(new) as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
        except (zipfile.BadZipFile, OSError, ValueError) as e:  # zipfile checks the CRC at the end
            problems.append(f"{new}: cannot be read ({e})")
            continue
        if digest_field(h) != row.digest:
            problems.append(f"{new}: other bytes than the source's {member} (its RECORD hash)")
    return problems


def variant_problems(source: Path, variant: Path, variant_json: bytes, *also: bytes) -> list[str]:
    """How ``variant`` differs from the variant of ``source`` it claims to be (empty: it is exactly that).

    Every member of the source must be there, renamed, with the same compressed bytes (METADATA and RECORD
    aside, which the variant rewrites), and ``variant.json`` must be ``variant_json`` (or one of ``also``:
    the same properties under an older schema a store may hold).
    """
    problems: list[str] = []
    name = parse_filename(source)
    public = str(name.version.public)
    try:
        with open_wheel(source) as s, zipfile.ZipFile(variant) as v:
            renames = renames_for(s, public)
            theirs = {i.filename: i for i in v.infolist()}
            changed = {f"{s.dist_info}/METADATA", f"{s.dist_info}/RECORD"}
            expected = set()
            for info in s.infos:
                member = info.orig_filename
                if member.startswith(f"{s.dist_info}/") and member.rpartition("/")[2] in SIGNATURES:
                    continue
                new = renamed(member, renames)
                expected.add(new)
                other = theirs.get(new)
                if other is None:
                    problems.append(f"{new}: missing")
                elif member not in changed and (other.CRC != info.CRC or other.file_size != info.file_size):
                    problems.append(f"{new}: other bytes than the source's {member}")
            problems += _data_problems(s, v, renames, changed, expected & set(theirs))
            added = f"{renames[s.dist_info]}/{VARIANT_JSON}"
            expected.add(added)
            if added not in theirs:
                problems.append(f"{added}: missing")
            elif v.read(added) not in (variant_json, *also):
                problems.append(f"{added}: other properties than the index records")
            problems += [f"{extra}: not in the source" for extra in sorted(set(theirs) - expected)]
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInput(f"{variant}: {e}") from e
    return problems
