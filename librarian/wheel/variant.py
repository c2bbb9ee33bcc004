"""The variant wheel of a stored wheel (PEP 825): the same members, raw, under the public version, plus a
``variant.json``; and the check that a variant wheel is exactly that.

Written as the relabel writes (every member's compressed bytes copied, never recompressed); only
METADATA's ``Version``, the ``.dist-info``/``.data`` names and RECORD change, and one member is added.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from librarian.coords import version_of
from librarian.errors import BadInput
from librarian.safeio import atomic_output
from librarian.wheel import zipwriter
from librarian.wheel.record import Record, digest_field, unrecorded
from librarian.wheel.relabel import _Hashing, _new_record, _rename, _rewrite_version
from librarian.wheel.wheelfile import SIGNATURES, OpenWheel, open_wheel, parse_filename

VARIANT_JSON = "variant.json"


@dataclass(frozen=True, slots=True)
class Written:
    """The variant wheel written: where, its sha256 and size (hashed as written)."""

    path: Path
    sha256: str
    size: int


def _renames(dist_info: str, data_dir: str, public: str) -> dict[str, str]:
    stem = f"{data_dir.rpartition('-')[0]}-{public}"
    return {dist_info: f"{stem}.dist-info", data_dir: f"{stem}.data"}


def write_variant(src: Path, out_dir: Path, filename: str, variant_json: bytes) -> Written:
    """Write the variant of ``src`` as ``out_dir/filename``; ``src`` is untouched."""
    name = parse_filename(src)
    public = str(name.version.public)
    dest = out_dir / filename
    out_dir.mkdir(parents=True, exist_ok=True)
    with open_wheel(src) as w:
        metadata, headers = w.headers("METADATA")
        if version_of(headers.get("Version", [""])[0]) != name.version:
            raise w.bad(
                f"{w.dist_info}/METADATA: Version {headers.get('Version')} does not match the filename"
            )
        if any(i.orig_filename == f"{w.dist_info}/{VARIANT_JSON}" for i in w.infos):
            raise w.bad(f"already a variant wheel ({w.dist_info}/{VARIANT_JSON})")
        record = Record(w)
        renames = _renames(w.dist_info, w.data_dir, public)
        metadata_info = w.member("METADATA")
        new_metadata = _rewrite_version(w, metadata, public)
        rewritten = {metadata_info.orig_filename: new_metadata}
        record_text = _new_record(w, record.rows, renames, rewritten)
        new_dist_info = renames[w.dist_info]
        added = f"{new_dist_info}/{VARIANT_JSON}"
        row = f"{added},{digest_field(hashlib.sha256(variant_json))},{len(variant_json)}\n".encode()
        record_member = f"{w.dist_info}/RECORD"
        with atomic_output(dest) as out:
            hashing = _Hashing(out)
            writer = zipwriter.RawZipWriter(hashing)  # type: ignore[arg-type]  # it only writes
            for info in w.infos:
                member = info.orig_filename
                new_member = _rename(member, renames)
                if member == record_member:
                    extra = zipfile.ZipInfo(added, date_time=metadata_info.date_time)
                    extra.compress_type = zipfile.ZIP_DEFLATED
                    extra.external_attr = 0o644 << 16
                    writer.add_bytes(extra, variant_json)
                    writer.add_bytes(info, record_text + row, name=new_member)
                elif member in rewritten:
                    writer.add_bytes(info, rewritten[member], name=new_member)
                elif member.startswith(f"{w.dist_info}/") and member.rpartition("/")[2] in SIGNATURES:
                    continue  # it signs the old RECORD
                else:
                    if not unrecorded(member, w.dist_info):
                        record.expected(member)
                    writer.add_raw(info, w.raw(info), name=new_member)
            writer.close()
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
        new = _rename(member, renames)
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


def variant_problems(source: Path, variant: Path, variant_json: bytes) -> list[str]:
    """How ``variant`` differs from the variant of ``source`` it claims to be (empty: it is exactly that).

    Every member of the source must be there, renamed, with the same compressed bytes (METADATA and RECORD
    aside, which the variant rewrites), and ``variant.json`` must be ``variant_json``.
    """
    problems: list[str] = []
    name = parse_filename(source)
    public = str(name.version.public)
    try:
        with open_wheel(source) as s, zipfile.ZipFile(variant) as v:
            renames = _renames(s.dist_info, s.data_dir, public)
            theirs = {i.filename: i for i in v.infolist()}
            changed = {f"{s.dist_info}/METADATA", f"{s.dist_info}/RECORD"}
            expected = set()
            for info in s.infos:
                member = info.orig_filename
                if member.startswith(f"{s.dist_info}/") and member.rpartition("/")[2] in SIGNATURES:
                    continue
                new = _rename(member, renames)
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
            elif v.read(added) != variant_json:
                problems.append(f"{added}: other properties than the index records")
            problems += [f"{extra}: not in the source" for extra in sorted(set(theirs) - expected)]
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInput(f"{variant}: {e}") from e
    return problems
