"""pull: find the exact wheel for a machine in a store, fetch it sha256-checked, optionally install it.

Resolution is pure (:mod:`librarian.ops.resolve`): the machine's wants against the index's entries. Only
the root index and the asked packages' shards are read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from librarian import progress
from librarian.errors import BadInput, BadWheel, NotFound, StoreError
from librarian.index import IndexEntry, entry_problems
from librarian.layout import Layout
from librarian.ops.machine.installer import write_requirements
from librarian.ops.resolve import Resolution, Wants, parse_pin, pin_key, resolve_pin
from librarian.ops.store.tree import read_index_or_tree
from librarian.safeio import atomic_path, sha256_file
from librarian.stores.base import Store

__all__ = [
    "NoMatch",
    "PullReport",
    "Resolution",
    "Wants",
    "check_wheel_identity",
    "fetch_checked",
    "parse_pin",
    "pin_key",
    "pull",
]

log = logging.getLogger(__name__)


def check_wheel_identity(path: Path, entry: IndexEntry) -> None:
    """Refuse (BadWheel) a fetched wheel that is not the one its index entry's cell and filename name.

    The sha256 only proves the bytes are the ones the entry points at; an entry of one package may point
    at another's wheel. The entry must agree with itself, and the wheel's METADATA with the entry.
    """
    problems = entry_problems(entry)
    try:
        from librarian.wheel import metadata_problems  # only a fetched wheel's: start-up reads no METADATA

        problems = problems or metadata_problems(path, entry.name)
    except BadWheel as e:
        problems = [str(e).removeprefix(f"{path}: ")]
    if problems:
        raise BadWheel(f"{entry.path}: {problems[0]}; refused")


def _sha256(path: Path, name: str) -> str:
    with progress.task(f"check {name}", path.stat().st_size) as bar:
        return sha256_file(path, on_chunk=bar.advance)


def fetch_checked(store: Store, entry: IndexEntry, out_dir: Path) -> Path:
    """Fetch to a temp name, check sha256 against the index, then rename into place.

    A file already in ``out_dir`` with the index's sha256 is kept as it is (nothing is downloaded).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / entry.filename
    if final.is_file() and _sha256(final, entry.filename) == entry.sha256:
        return final
    with atomic_path(final) as partial:  # renamed into place only once checked
        store.fetch(entry.path, partial, entry.sha256)
        if _sha256(partial, entry.filename) != entry.sha256:
            raise StoreError(f"{entry.path}: downloaded bytes do not match the index's sha256; refused")
        check_wheel_identity(partial, entry)  # the bytes are the entry's; are they the wheel it names?
    return final


def pull(
    store: Store,
    default_layout: Layout,
    packages: Sequence[str],
    wants: Wants,
    out_dir: Path,
    *,
    compatible: bool = False,
    requirements: Path | None = None,
) -> PullReport:
    """Resolve every package and fetch the picks; raises NotFound (exit 1) if any package has no fit.

    With ``requirements``, nothing is downloaded: the picks are written there as hash-pinned direct
    references (``name @ URL --hash=sha256:...``) that plain pip and uv install from, and that path returned.
    """
    if not packages:
        raise BadInput("pull: name at least one package")
    if requirements is not None and requirements.is_dir():  # said before the store is read
        raise BadInput(f"{requirements}: is a directory; --requirements names the file to write")
    pins = [parse_pin(p) for p in packages]
    index, listed = read_index_or_tree(store, default_layout, [pin.key for pin in pins])
    resolutions = [resolve_pin(index.for_package(pin.key), pin, wants, compatible) for pin in pins]
    if listed:  # no index.json: the tree was listed instead; say so once, with the first package
        resolutions[0] = replace(resolutions[0], note="; ".join(filter(None, (listed, resolutions[0].note))))
    missing = [r for r in resolutions if r.pick is None]
    if missing:
        raise NoMatch(store.location, wants, tuple(missing))
    picks = [r.pick for r in resolutions if r.pick is not None]
    if requirements is not None:
        write_requirements(requirements, [(e, store.url_for(e.path)) for e in picks])
        return PullReport(store.location, wants, tuple(resolutions), (requirements,), requirements)
    files = [fetch_checked(store, e, out_dir) for e in picks]
    for e, f in zip(picks, files, strict=True):
        log.info("took %s -> %s (sha256 %s checked)", e.path, f, e.sha256[:12])
    return PullReport(store.location, wants, tuple(resolutions), tuple(files))


@dataclass(frozen=True, slots=True)
class PullReport:
    """What pull chose for each package and where it put it (or the requirements file it wrote)."""

    location: str
    wants: Wants
    resolutions: tuple[Resolution, ...]
    files: tuple[Path, ...]  # one per resolution; the requirements file alone with ``requirements``
    requirements: Path | None = None

    @property
    def notes(self) -> tuple[str, ...]:
        """What the resolver wants said (several CUDA lines fit, a compatible pick, a listed tree)."""
        return tuple(r.note for r in self.resolutions if r.note)

    def render(self) -> str:
        """``store path -> file`` per wheel, or where the requirements file is and how to use it."""
        if self.requirements is not None:
            n = len(self.resolutions)
            return f"wrote {self.requirements} ({n} wheel(s)); install with: pip install --force-reinstall --no-deps -r {self.requirements.absolute()}"
        return "\n".join(
            f"{r.pick.path} -> {f}"
            for r, f in zip(self.resolutions, self.files, strict=False)
            if r.pick is not None
        )

    def to_json(self) -> dict[str, Any]:
        """The picks for ``--json``."""
        files = self.files if self.requirements is None else (self.requirements,) * len(self.resolutions)
        return {
            "schema": 1,
            "repo": self.location,
            "wants": self.wants.describe(),
            "requirements": str(self.requirements) if self.requirements else None,
            "wheels": [
                {"package": r.package, "path": r.pick.path if r.pick else None, "file": str(f)}
                for r, f in zip(self.resolutions, files, strict=False)
            ],
        }


class NoMatch(NotFound):
    """No stored wheel fits; carries the near candidates for the message."""

    def __init__(self, location: str, wants: Wants, misses: tuple[Resolution, ...]) -> None:
        self.wants = wants
        self.misses = misses
        names = ", ".join(r.package for r in misses)
        super().__init__(f"{names}: no wheel in {location} for {wants.describe()}")

    def details(self) -> list[str]:
        """The lines that explain each miss (the CLI prints them after the error line)."""
        lines = []
        for r in self.misses:
            if not r.near and not r.note:
                lines.append(f"  {r.package}: not in the store at all")
            here = [c for c in r.near if not c.other_platform] or list(r.near[:1])  # this OS and CPU's
            lines.extend(f"  {near}" for near in here)
            if others := len(r.near) - len(here):
                where = ", ".join(r.elsewhere)
                lines.append(f"  {r.package}: {others} more for other platforms ({where}); --json lists them")
            lines.extend(f"  {what}: {text}" for what, text in (("note", r.note), ("hint", r.hint)) if text)
        return lines

    def data(self) -> dict[str, object]:
        """For ``--json``: each near candidate, the demands its judgement fails, and every way it misses."""
        return {
            "candidates": [
                {
                    "package": r.package,
                    "path": c.entry.path,
                    "cells": [f"sm{sm}" for sm in c.filed or (c.entry.cell.sm.sm,)],
                    "fails": [v.demand.value for v in c.judgement.failures],
                    "differences": list(c.differences),
                }
                for r in self.misses
                for c in r.near
            ]
        }
