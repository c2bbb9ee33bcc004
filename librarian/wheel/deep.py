"""A deep read of a wheel in one pass: METADATA and WHEEL, RECORD's hashes and the binaries' demands.

Each member is inflated once: a native or device-code member's plain bytes are hashed for RECORD as they
are inflated and go, in memory or spooled to a temporary file (:func:`librarian.wheel.members.collected`),
to the ELF and fatbin readers. What is found is kept apart, so a caller reports it in the order the
separate checks would: the wheel unreadable, then the first member RECORD lies about, then metadata
problems, then the first member inspection fails on.
"""

from __future__ import annotations

import functools
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from librarian.coords import WheelName
from librarian.errors import BadWheel, LibrarianError
from librarian.facts import BinaryFacts, WheelFacts
from librarian.wheel import zipraw
from librarian.wheel.members import collected, first_bomb, inspect_member, inspect_members, native_members
from librarian.wheel.metadata_checks import metadata_problems_of, refuse_unpublishable
from librarian.wheel.record import Record, check_all
from librarian.wheel.wheelfile import (
    OpenWheel,
    WheelInfo,
    info_of,
    open_wheel,
)


@dataclass(frozen=True, slots=True)
class DeepRead:
    """What one pass over a wheel found; lines without the ``path: `` prefix, inspection's naming ``wheel.whl!member``."""

    path: Path
    info: WheelInfo | None  # None: METADATA or WHEEL could not be read (``unreadable`` says why)
    unreadable: BadWheel | None
    problems: tuple[str, ...]  # METADATA, WHEEL and the .dist-info against the filename
    liar: str | None  # the first member RECORD lies about (None: none, or RECORD not checked)
    facts: WheelFacts | None  # None when a member lied or inspection failed
    failure: LibrarianError | None  # the first member inspection refused or could not read

    def publishable(self) -> tuple[WheelInfo, WheelFacts]:
        """What publish needs, or the first failure raised as publish's separate checks would raise it."""
        if self.liar is not None:
            raise BadWheel(f"{self.path}: {self.liar}")
        if self.unreadable is not None:
            raise self.unreadable
        assert self.info is not None
        refuse_unpublishable(self.path, self.info)
        if self.failure is not None:
            raise self.failure
        assert self.facts is not None
        return self.info, self.facts


def read_deep(
    path: Path,
    name: WheelName | None = None,
    *,
    record: bool = True,
    jobs: int | None = None,
    directory: zipraw.Directory | None = None,
) -> DeepRead:
    """Read ``path`` (named ``name``, default its filename) once: metadata, RECORD (``record``) and binaries.

    Members are read by ``jobs`` threads (default: the cores available); ``directory`` as for
    :func:`~librarian.wheel.wheelfile.open_wheel`. BadWheel if it cannot be opened.
    """
    with open_wheel(path, name, directory) as w:
        info: WheelInfo | None = None
        unreadable = None
        try:
            info = info_of(w)
        except BadWheel as e:
            unreadable = e
        except zipraw.ZipError as e:  # METADATA or WHEEL does not inflate: as open_wheel would say it
            unreadable = BadWheel(f"{path}: {e}")
        problems = tuple(metadata_problems_of(info)) if info is not None else ()
        natives = native_members(w.f, w.infos, w.offsets)
        liar, facts, failure = _binaries(w, natives, first_bomb(natives, path.name), record, jobs)
        return DeepRead(path, info, unreadable, problems, liar, facts, failure)


def _binaries(
    w: OpenWheel, natives: list[zipfile.ZipInfo], bomb: BadWheel | None, record: bool, jobs: int | None
) -> tuple[str | None, WheelFacts | None, LibrarianError | None]:
    """The first RECORD liar (``record``), the binaries' facts, and inspection's first failure (``bomb``, if any)."""
    if not record:
        if bomb is not None:
            return None, None, bomb
        try:
            return None, inspect_members(w.f, natives, w.offsets, w.path.name, jobs=jobs), None
        except LibrarianError as e:
            return None, None, e
    outcomes: dict[str, BinaryFacts | LibrarianError] = {}
    try:
        rec = Record(w)
        if bomb is not None:  # a bomb is not inflated whole; RECORD is still checked, streaming
            check_all(rec, jobs)
        else:
            inspect = functools.partial(_inspect_checked, rec, outcomes=outcomes)
            check_all(rec, jobs, {i.orig_filename for i in natives}, inspect)
    except BadWheel as e:
        return str(e).removeprefix(f"{w.path}: "), None, bomb
    except zipraw.ZipError as e:
        return str(e), None, bomb
    if bomb is not None:
        return None, None, bomb
    found = [outcomes[i.orig_filename] for i in natives]
    failure = next((o for o in found if isinstance(o, LibrarianError)), None)
    if failure is not None:
        return None, None, failure
    facts = WheelFacts(filename=w.path.name, binaries=tuple(o for o in found if isinstance(o, BinaryFacts)))
    return None, facts, None


class Inspector:
    """Inspects a wheel's native and device-code members as their RECORD hashes are checked, so that one
    inflate gives both: a deep read, and a retag that verifies (the relabelled copy's facts come free).

    Call it on a member (any thread); :meth:`facts` then gives the wheel's facts, raising the first
    member's inspection failure in member order. ``None`` from :meth:`for_wheel` where a member may not
    be inflated whole (a bomb): RECORD is still checked, streaming, and the caller inspects nothing.
    """

    def __init__(self, rec: Record, natives: list[zipfile.ZipInfo]) -> None:
        self.rec, self.natives = rec, natives
        self.names = frozenset(i.orig_filename for i in natives)
        self.outcomes: dict[str, BinaryFacts | LibrarianError] = {}

    @classmethod
    def for_wheel(cls, rec: Record) -> Inspector | None:
        """The inspector of ``rec``'s wheel, or ``None`` where a member is a bomb (not to be inflated whole)."""
        natives = native_members(rec.w.f, rec.w.infos, rec.w.offsets)
        return None if first_bomb(natives, rec.w.path.name) is not None else cls(rec, natives)

    def __call__(self, info: zipfile.ZipInfo) -> None:
        _inspect_checked(self.rec, info, outcomes=self.outcomes)

    def facts(self, filename: str) -> WheelFacts:
        """The facts of every inspected member, named ``filename``; the first failure (member order) raises."""
        found = [self.outcomes[i.orig_filename] for i in self.natives]
        if failure := next((o for o in found if isinstance(o, LibrarianError)), None):
            raise failure
        return WheelFacts(filename, tuple(o for o in found if isinstance(o, BinaryFacts)))


class _Source:
    """A member's checked plain bytes; remembers a failure of the RECORD check itself (not inspection's)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = chunks
        self.error: Exception | None = None

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.chunks
        except (BadWheel, zipraw.ZipError) as e:
            self.error = e
            raise


def _inspect_checked(
    rec: Record, info: zipfile.ZipInfo, outcomes: dict[str, BinaryFacts | LibrarianError]
) -> None:
    """Check one native member against RECORD and inspect the same plain bytes; a RECORD failure raises,
    inspection's is kept in ``outcomes``."""
    wheel = rec.w.path.name
    source = _Source(rec.checked_plain(info))
    try:
        with collected(info, source, wheel) as plain:
            outcomes[info.orig_filename] = inspect_member(info, plain, wheel)
    except LibrarianError as e:
        if source.error is not None:
            raise source.error from None
        outcomes[info.orig_filename] = e
