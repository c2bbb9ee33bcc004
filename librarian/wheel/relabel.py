"""The relabel: the byte rewrite of a wheel under a label (filename, METADATA ``Version``, ``.dist-info`` and
``.data`` names, RECORD), behind the retag command and publish.

Every other member is copied as its compressed bytes, never recompressed, with its permissions; RECORD
hashes are checked on the way (on a pool of threads). The output is a temp file in the output folder,
renamed into place at the end.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from librarian import progress
from librarian.coords import Label, WheelName
from librarian.errors import LibrarianError, Refused
from librarian.facts import WheelFacts
from librarian.pool import Pipeline, jobs_for
from librarian.safeio import atomic_output
from librarian.wheel import zipraw, zipwriter
from librarian.wheel.deep import Inspector
from librarian.wheel.record import Checks, Record, verify_record
from librarian.wheel.rewrite import (
    Hashing,
    RewritePlan,
    bind,
    metadata_with_version,
    wheel_with_tags,
    write_rewrite,
)
from librarian.wheel.wheelfile import OpenWheel, open_wheel, parse_filename

log = logging.getLogger(__name__)


def _refuse_relabel(src: Path, name: WheelName, label: Label) -> None:
    claim = name.label_claim
    what = f" ({claim})" if claim else ""
    local = src.name.split("-")[1].partition("+")[2]  # as the filename spells it, not normalised
    raise Refused(f"{src}: already labelled +{local}{what}; pass --relabel to relabel it +{label}")


def retag(
    src: Path,
    label: Label,
    out_dir: Path,
    *,
    relabel: bool = False,
    verify: bool = True,
    jobs: int | None = None,
) -> Path:
    """Write ``src`` relabelled ``+label`` into ``out_dir`` and return the new path; ``src`` is untouched.

    With ``verify``, members are checked against RECORD by ``jobs`` threads (default: the cores available)
    while this one copies their raw bytes; the output is the same bytes whatever ``jobs`` is.
    """
    # Only the path is returned: the new wheel's sha256 would be a pass over all of it for nothing.
    return retag_with_directory(
        src, label, out_dir, relabel=relabel, verify=verify, jobs=jobs, digest=False
    ).path


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What a retag wrote: the new wheel, its central directory (for a reader not to parse it again), and
    its binaries' facts, read from the very bytes RECORD was checked on (``None``: not verified, or a
    member too big to inflate whole)."""

    path: Path
    directory: zipraw.Directory | None
    facts: WheelFacts | None
    unread: LibrarianError | None = None  # why the binaries could not be read, where they could not
    sha256: str | None = None  # of the new wheel, hashed as it was written (``None``: not rewritten)
    size: int | None = None  # of the new wheel, counted as it was written (``None``: not rewritten)
    written: tuple[bytes, bytes] | None = None  # the METADATA and WHEEL it wrote (``None``: not rewritten)


def retag_with_directory(
    src: Path,
    label: Label,
    out_dir: Path,
    *,
    relabel: bool = False,
    verify: bool = True,
    jobs: int | None = None,
    repair_tags: bool = False,
    write: bool = True,
    digest: bool = True,
    source: zipraw.Directory | None = None,
) -> Rewritten:
    """:func:`retag`, and the central directory it wrote (``None`` where it wrote none: already labelled),
    so that a reader of the new wheel need not parse it again (:func:`~librarian.wheel.wheelfile.open_wheel`);
    with ``verify``, the facts of its binaries too (each inflated once, for RECORD and inspection alike).

    ``repair_tags``: WHEEL's ``Tag:`` lines are rewritten to the filename's (the wheel is rewritten even
    when it carries the label already). ``write`` ``False``: every check and measure of a retag (RECORD,
    the binaries, the new wheel's sha256 and size), and no file written (``publish --dry-run``). ``digest``
    ``False``: the new wheel's sha256 is not computed (``Rewritten.sha256`` is ``None``): a caller that
    stores nothing (the retag command) saves a pass of sha256 over the whole wheel. ``source``: ``src``'s
    members and offsets from a caller that has just opened it (:meth:`OpenWheel.directory`), not parsed again."""
    name = parse_filename(src)
    if write:
        out_dir.mkdir(parents=True, exist_ok=True)
    if name.label == label and not repair_tags:
        if not write:
            raise ValueError("a dry retag is for a wheel that needs rewriting")
        return Rewritten(_already(src, out_dir, verify, jobs), None, None)
    if name.version.local is not None and not relabel and name.label != label:
        _refuse_relabel(src, name, label)
    new_name = name.with_label(label)
    dest = out_dir / str(new_name)
    with open_wheel(src, directory=source) as w:
        record = Record(w)
        rewritten, new_metadata, wheel = _new_info(
            w, record, name, new_name, verify=verify, repair_tags=repair_tags
        )
        rewrite = bind(w, record, RewritePlan(str(new_name.version), rewritten))
        inspector = Inspector.for_wheel(record) if verify else None
        output = atomic_output(dest) if write else contextlib.nullcontext(None)
        with output as out, progress.task(f"retag {src.name}", total=src.stat().st_size) as bar:
            hashing = Hashing(out, digest)
            writer = zipwriter.RawZipWriter(hashing)  # type: ignore[arg-type]  # it only writes
            if verify and jobs_for(jobs) > 1:
                with Pipeline(jobs_for(jobs), "record") as pipeline:
                    checks = Checks(record, pipeline)
                    try:
                        write_rewrite(rewrite, record, writer, checks, bar, inspector)
                    finally:
                        pipeline.drain()  # an earlier member's failure is the one to report
            else:
                write_rewrite(rewrite, record, writer, verify, bar, inspector)
            facts, unread = _facts_of(inspector, dest.name)
    sha = hashing.digest.hexdigest() if hashing.digest is not None else None
    return Rewritten(dest, writer.directory(), facts, unread, sha, hashing.size, (new_metadata, wheel))


def _new_info(
    w: OpenWheel, record: Record, name: WheelName, new_name: WheelName, *, verify: bool, repair_tags: bool
) -> tuple[dict[str, bytes], bytes, bytes]:
    """The members a retag rewrites (METADATA's Version, and with ``repair_tags`` WHEEL's Tag lines), each
    held to RECORD first; the new METADATA and WHEEL."""
    metadata, _ = w.metadata_of(name.version)
    metadata_info = w.member("METADATA")
    record.expected(metadata_info.orig_filename)
    if verify:
        record.check(metadata_info)
    new_metadata = metadata_with_version(w, metadata, str(new_name.version))
    rewritten = {metadata_info.orig_filename: new_metadata}
    wheel_info = w.member("WHEEL")
    if repair_tags:
        record.expected(wheel_info.orig_filename)
        if verify:
            record.check(wheel_info)
        rewritten[wheel_info.orig_filename] = wheel_with_tags(w.read_small(wheel_info), new_name)
    wheel = rewritten.get(wheel_info.orig_filename) or w.read_small(wheel_info)
    return rewritten, new_metadata, wheel


def _facts_of(inspector: Inspector | None, name: str) -> tuple[WheelFacts | None, LibrarianError | None]:
    """The rewritten wheel's facts, where it was inspected; a binary the readers refuse is said, and the
    retag stands (its job is done all the same)."""
    if inspector is None:
        return None, None
    try:
        return inspector.facts(name), None
    except LibrarianError as e:
        return None, e


def _already(src: Path, out_dir: Path, verify: bool, jobs: int | None) -> Path:
    """``src`` already carries the label: nothing to rewrite; copied into ``out_dir`` if elsewhere."""
    dest = out_dir / src.name
    if dest.resolve() == src.resolve():
        return src
    if verify:
        verify_record(src, jobs=jobs)
    with atomic_output(dest) as out, src.open("rb") as f:
        shutil.copyfileobj(f, out, zipraw.CHUNK)
    return dest
