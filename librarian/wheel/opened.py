"""One wheel on disk, opened once: its path, its name and its zip directory (members and data offsets),
and every read of it from there, so that no caller threads the directory from one read to the next.

``OpenedWheel.archive`` checks the zip alone (inspect and doctor read a wheel whose dist-info is broken, and
say so); ``OpenedWheel.wheel`` checks it as a wheel and reads METADATA and WHEEL (publish).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from librarian.coords import Label, WheelName
from librarian.facts import WheelFacts
from librarian.wheel import zipraw
from librarian.wheel.deep import DeepRead, read_deep
from librarian.wheel.members import inspect_wheel
from librarian.wheel.metadata_checks import refuse_unpublishable
from librarian.wheel.relabel import Rewritten, retag_with_directory
from librarian.wheel.wheelfile import (
    WheelInfo,
    check_archive,
    info_of,
    info_of_written,
    open_wheel,
    parse_filename,
    read_wheel_info,
)


@dataclass(frozen=True)
class OpenedWheel:
    """A wheel file whose zip directory was read and checked once; its reads take that directory."""

    path: Path
    name: WheelName
    directory: zipraw.Directory | None = field(repr=False)  # None: each read checks the zip itself
    info_read: WheelInfo | None = field(default=None, repr=False, compare=False)

    @classmethod
    def at(cls, path: Path, name: WheelName | None = None) -> OpenedWheel:
        """``path`` unread: a single read of it (verify's deep pass) checks the zip as it goes."""
        return cls(path, name or WheelName.parse(path.name), None)

    @classmethod
    def archive(cls, path: Path, name: WheelName | None = None) -> OpenedWheel:
        """``path`` checked as a zip (names, local headers, overlaps); BadWheel in one line if it is not one."""
        return cls(path, name or WheelName.parse(path.name), check_archive(path))

    @classmethod
    def wheel(cls, path: Path, name: WheelName | None = None) -> OpenedWheel:
        """``path`` checked as a wheel (``name``: its filename, where the file has another), with its
        METADATA and WHEEL read."""
        with open_wheel(path, name) as w:
            return cls(path, name or parse_filename(path), w.directory(), info_of(w))

    def info(self) -> WheelInfo:
        """Its names, METADATA, WHEEL tags and members (payload not inflated); BadWheel if unreadable."""
        return self.info_read or read_wheel_info(self.path, self.name, self.directory)

    def facts(self, jobs: int | None = None) -> WheelFacts:
        """What its native and device-code members demand, read by ``jobs`` threads."""
        return inspect_wheel(self.path, jobs=jobs, directory=self.directory)

    def deep(self, *, record: bool = True, jobs: int | None = None) -> DeepRead:
        """Metadata, RECORD (``record``) and binaries, in one pass."""
        return read_deep(self.path, self.name, record=record, jobs=jobs, directory=self.directory)

    def retag(self, label: Label, out_dir: Path, **options: Any) -> Rewritten:
        """Relabelled ``+label`` into ``out_dir``: :func:`~librarian.wheel.relabel.retag_with_directory`'s
        options, over the directory read once."""
        return retag_with_directory(self.path, label, out_dir, source=self.directory, **options)

    @staticmethod
    def written(rewritten: Rewritten) -> OpenedWheel:
        """The wheel a retag wrote, with the directory, METADATA and WHEEL the writer knows (not read back:
        a dry run wrote nothing), held to verify's checks."""
        assert rewritten.directory is not None and rewritten.written is not None  # a rewrite, not a copy
        path = rewritten.path
        name = parse_filename(path)
        info = info_of_written(path, name, rewritten.directory.infos, *rewritten.written)
        return OpenedWheel(path, name, rewritten.directory, refuse_unpublishable(path, info))
