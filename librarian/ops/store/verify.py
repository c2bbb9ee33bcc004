"""verify: every stored wheel against its path, its label, its metadata and the index.

Shallow checks read only the tree listing, the index and (for a local store) each wheel's METADATA;
``deep`` also reads every byte: RECORD hashes, and the binaries' GPU code against the cell.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from librarian import progress
from librarian.build_failure import BuildFailure
from librarian.build_record import BuildRecord
from librarian.coords import Cell, Label, WheelName
from librarian.demands import Claim, Demand, Wheel, claims, judge_cell
from librarian.errors import LibrarianError
from librarian.facts import WheelFacts
from librarian.index import Index, IndexEntry, entry_problems
from librarian.layout import Layout
from librarian.ops.store.failures import read_failures
from librarian.ops.store.placement import Accepted, Problem, check_placement
from librarian.ops.store.tree import is_wheel
from librarian.ops.store.verify_files import check_catalogue, check_metadata_files, check_variants
from librarian.pending import parse_pending_path
from librarian.pool import default_jobs, ordered_map
from librarian.safeio import sha256_stream
from librarian.stores.base import LocalFiles, Store, StoredFile, read_index
from librarian.wheel import OpenedWheel, metadata_problems

log = logging.getLogger(__name__)

NOT_INDEXED = "not in the index ('librarian reindex --adopt' reads it and takes it in)"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What verify looked at and what it found."""

    location: str
    wheels: int
    problems: tuple[Problem, ...]
    staged: tuple[str, ...] = ()  # wheels staged by ``publish --stage``, awaiting ``reindex``: not a problem
    deep: bool = False
    accepted: tuple[Accepted, ...] = ()  # findings a publish overrode, by the flag its entry records
    builds: tuple[tuple[str, BuildRecord], ...] = ()  # the entries that record how librarian built them
    failures: tuple[BuildFailure, ...] = ()  # failed builds the store remembers (plan leaves them out)

    def render(self) -> str:
        """Every problem, one line each, then what was accepted, what was checked and the state."""
        lines = [str(p) for p in self.problems] + [
            f"{path}: staged, awaiting reindex" for path in self.staged
        ]
        lines += [str(a) for a in self.accepted]
        lines += [f"{f.path}: a failed build, recorded {f.date}: {f.reason}" for f in self.failures]
        if self.builds:
            sources = len({b.source.key for _, b in self.builds})
            lines.append(
                f"{len(self.builds)} wheel(s) record their build ({sources} source(s); each one's source, "
                "toolchain, seconds and runner: verify --json, ls --json)"
            )
        state = f"{len(self.problems)} problem(s)" if self.problems else "all consistent"
        if self.accepted:
            state += f"; {len(self.accepted)} accepted at publish"
        if self.staged:
            state += f"; {len(self.staged)} staged, awaiting 'librarian reindex'"
        lines.append(
            f"checked {self.wheels} wheel(s) in {self.location}{' (deep)' if self.deep else ''}: {state}"
        )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The report for ``--json``; a problem's ``also`` lists the other paths of the same bytes, where any."""
        problems = [
            {"path": p.path, "problem": p.problem, **({"also": list(p.also)} if p.also else {})}
            for p in self.problems
        ]
        accepted = [{"path": a.path, "flag": a.flag, "finding": a.finding} for a in self.accepted]
        return {
            "schema": 1,
            "repo": self.location,
            "wheels": self.wheels,
            "ok": not self.problems,
            "problems": problems,
            "staged": list(self.staged),
            "accepted": accepted,
            "builds": [{"path": path, "build": b.to_json()} for path, b in self.builds],
            "failures": [{"path": f.path, **f.to_json()} for f in self.failures],
        }


@dataclass(slots=True)
class _Blob:
    """What one stored blob's bytes say, read once however many paths it is filed under (hard links, LFS)."""

    sha256: str | None
    problems: list[str]
    facts: WheelFacts | None
    paths: list[str] = field(default_factory=list)


def _same_bytes(blobs: Iterable[_Blob]) -> list[_Blob]:
    """Blobs of one sha256 as one (a store copied without its hard links keeps a file per cell): their
    findings said once, naming every path. Blobs whose sha256 is not known stay as they are."""
    merged: dict[object, _Blob] = {}
    for i, blob in enumerate(blobs):
        key = blob.sha256 or i
        if key in merged:
            merged[key].paths.extend(blob.paths)
        else:
            merged[key] = replace(blob, paths=list(blob.paths))
    return list(merged.values())


class _Reader:
    """Reads each stored blob once: keyed by inode locally, by sha256 on the Hub.

    :meth:`load` reads the blobs ``jobs`` at a time (a deep read is inflating and hashing, which release
    the GIL); :meth:`read` then hands each path its blob, in the caller's order.
    """

    def __init__(self, store: Store, deep: bool, jobs: int | None = None) -> None:
        self.store, self.deep = store, deep
        self.jobs = jobs or default_jobs()
        self.blobs: dict[tuple[str, object], _Blob] = {}
        self.keys: dict[str, tuple[str, object]] = {}

    def _key(self, f: StoredFile) -> tuple[str, object]:
        key = self.keys.get(f.path)
        if key is None:
            name = WheelName.parse(f.path.rsplit("/", 1)[-1])
            identity: object = f.sha256 or f.path
            if isinstance(self.store, LocalFiles):  # hard links are one blob: key them by inode
                with contextlib.suppress(LibrarianError):
                    identity = self.store.file_identity(f.path)
            key = self.keys[f.path] = (str(name), identity)
        return key

    def load(self, files: list[StoredFile], bar: progress.Task) -> None:
        """Read every distinct blob among ``files``; the bar advances a wheel per path as its blob is read."""
        first: dict[tuple[str, object], StoredFile] = {}
        paths: dict[tuple[str, object], int] = {}
        for f in files:
            key = self._key(f)
            first.setdefault(key, f)
            paths[key] = paths.get(key, 0) + 1
        todo = [(key, f) for key, f in first.items() if key not in self.blobs]
        # Many blobs: one thread each, members read in turn; few: the threads go to each one's members.
        outer = self.jobs if len(todo) >= self.jobs else 1
        inner = 1 if outer > 1 else self.jobs

        def read(item: tuple[tuple[str, object], StoredFile]) -> _Blob:
            return self._read(item[1], WheelName.parse(item[1].path.rsplit("/", 1)[-1]), inner)

        for (key, _), blob in zip(todo, ordered_map(read, todo, outer, "verify"), strict=True):
            self.blobs[key] = blob
            bar.advance(paths[key])

    def blob_of(self, f: StoredFile) -> _Blob | None:
        """The blob ``f`` was read as, if it was."""
        key = self.keys.get(f.path)
        return self.blobs.get(key) if key is not None else None

    def read(self, f: StoredFile) -> _Blob:
        """The blob ``f`` is filed as (read now if :meth:`load` did not), ``f`` added to its paths."""
        key = self._key(f)
        blob = self.blobs.get(key)
        if blob is None:
            blob = self.blobs[key] = self._read(f, WheelName.parse(f.path.rsplit("/", 1)[-1]), self.jobs)
        blob.paths.append(f.path)
        return blob

    def _read(self, f: StoredFile, name: WheelName, jobs: int) -> _Blob:
        if not (self.deep or isinstance(self.store, LocalFiles)):  # a shallow check downloads nothing
            return self._judge(name, None, f.sha256, jobs)
        # A download is removed once read: disk holds the blobs in flight.
        with contextlib.ExitStack() as stack:
            try:
                file = stack.enter_context(self.store.open(f.path))
            except LibrarianError as e:
                return _Blob(f.sha256, [str(e).split(": ", 1)[-1]], None)
            return self._judge(name, Path(file.name), f.sha256 or sha256_stream(file), jobs)

    def _judge(self, name: WheelName, local: Path | None, sha: str | None, jobs: int) -> _Blob:
        blob = _Blob(sha, [], None)
        if local is None:
            return blob
        try:
            if not self.deep:
                blob.problems.extend(metadata_problems(local, name))
            else:  # metadata, RECORD and binaries from one pass over the wheel, each member inflated once
                found = OpenedWheel.at(local, name).deep(jobs=jobs)
                if found.unreadable is not None:
                    raise found.unreadable
                blob.problems.extend(found.problems)
                if found.liar is not None:
                    blob.problems.append(found.liar)
                    return blob
                if found.failure is not None:
                    raise found.failure
                assert found.facts is not None
                blob.facts = found.facts
        except LibrarianError as e:
            blob.problems.append(str(e).removeprefix(f"{local}: "))
        return blob


def _check_wheel(
    f: StoredFile, entry: IndexEntry | None, blob: _Blob, layout: Layout
) -> tuple[list[str], list[str]]:
    """The problems of one stored path (against the index, and its bytes against its cell), and the findings
    its entry's overrides accept."""
    problems: list[str] = []
    if entry is None:
        problems.append(NOT_INDEXED)
    elif entry.size != f.size:
        problems.append(f"size {f.size} but the index says {entry.size}")
    problems += entry_problems(entry, layout) if entry is not None else []
    if entry is not None and blob.sha256 is not None and blob.sha256 != entry.sha256:
        problems.append(f"sha256 {blob.sha256[:12]}… but the index says {entry.sha256[:12]}…")
    accepted: list[str] = []
    if blob.facts is not None and (parsed := layout.parse_path(f.path)) is not None:
        # The path, not the index entry, says where it is filed: a wheel moved by hand has no entry.
        found = _check_binaries(WheelName.parse(f.path.rsplit("/", 1)[-1]), blob.facts, parsed[0])
        if entry is not None and "--trust-sm" in entry.overrides:
            accepted += found
        else:
            problems += found
    return problems, accepted


def _claims_by_path(blob: _Blob, layout: Layout) -> dict[tuple[Claim, ...], list[str]]:
    """Where the blob's names and its bytes disagree, and at which of its paths: a labelled wheel's label
    claims the same wherever it is filed; an unlabelled wheel's claim is each cell's path (one set of bytes
    filed under two CUDA lines may be right under one only). METADATA and WHEEL: in the blob's problems."""
    found: dict[tuple[Claim, ...], list[str]] = {}
    if blob.facts is None:
        return found
    said: dict[tuple[str, Label | None], tuple[Claim, ...]] = {}
    for path in sorted(blob.paths):
        name = WheelName.parse(path.rsplit("/", 1)[-1])
        parsed = layout.parse_path(path) if name.label_claim is None else None
        key = (str(name), parsed[0].label if parsed is not None else None)
        if key not in said:
            said[key] = claims(Wheel(name, blob.facts, filed_as=key[1]))
        found.setdefault(said[key], []).append(path)
    return found


def _check_binaries(name: WheelName, facts: WheelFacts, cell: Cell) -> list[str]:
    """The binaries against the cell they are filed in: does the judgement say they run there natively?"""
    judgement = judge_cell(Wheel(name, facts, filed_as=cell.label), cell)
    gpu = judgement.verdict(Demand.GPU)
    if not any(b.has_kernels for b in facts.binaries) or judgement.native:
        return []
    if gpu.ok is not True:
        return [f"its binaries do not run on sm{cell.sm.sm} (they have {gpu.wheel_needs})"]
    return [f"its binaries run on sm{cell.sm.sm} only by JIT-compiling PTX (they have {gpu.wheel_needs})"]


def verify(
    store: Store, default_layout: Layout, *, deep: bool = False, jobs: int | None = None
) -> VerifyReport:
    """Check the whole store; every problem is listed, none stops the check.

    Wheels' bytes are read by ``jobs`` threads (default: the cores available); the report is the same.
    """
    index = read_index(store, default_layout)
    listing = store.list_files()
    by_path = index.by_path()
    problems: list[Problem] = []
    files = {f.path: f for f in listing.files}
    wheels = [f for f in listing.files if is_wheel(f.path)]
    pending = _pending(listing.files)
    staged: list[str] = []
    accepted: list[Accepted] = []
    bad_paths = {b.path for b in index.bad}
    with progress.task(f"verify {store.location}", total=len(wheels), unit=progress.WHEELS) as bar:
        reader = _Reader(store, deep, jobs)
        placement = {f.path: check_placement(index.layout, f.path) for f in wheels}
        reader.load([f for f in wheels if not placement[f.path]], bar)
        for f in wheels:
            if misplaced := placement[f.path]:
                problems.extend(Problem(f.path, p) for p in misplaced)
                bar.advance()  # misplaced: never loaded
                continue
            blob = reader.read(f)
            # A local blob's sha256 was computed as it was read: _staged need not hash the wheel again.
            sha = f.sha256 or (blob.sha256 if isinstance(store, LocalFiles) else None)
            if (staging := _staged(f, by_path.get(f.path), pending.get(f.path), sha)) is not None:
                # Staged (maybe over an indexed wheel): judged as a wheel of its own until reindex merges it.
                staged.append(f.path)
                checked, _ = _check_wheel(f, None, blob, index.layout)
                found = [p for p in checked if p != NOT_INDEXED] + staging
            else:
                entry = by_path.get(f.path)
                found, ok = _check_wheel(f, entry, blob, index.layout)
                if entry is None and f.path in bad_paths:
                    found = [p for p in found if p != NOT_INDEXED]  # its bad entry is named once
                accepted += [Accepted(f.path, "--trust-sm", a) for a in ok]
            problems.extend(Problem(f.path, p) for p in found)
    found_bytes, accepted_bytes = _bytes_findings(reader.blobs.values(), by_path, index.layout)
    problems += found_bytes
    accepted += accepted_bytes
    problems += _index_findings(index, wheels, files, pending)
    problems.extend(check_metadata_files(store, index, files))
    judged = {f.path: b.facts for f in wheels if (b := reader.blob_of(f)) is not None and b.facts}
    problems.extend(check_variants(store, index, files, deep, judged))
    problems.extend(check_catalogue(store, index, files))
    problems.extend(Problem(path, why) for path, why in listing.strays)  # links, FIFOs, temp files, journal
    remembered = read_failures(store, listing=listing)  # a corrupt record: named, never believed
    problems.extend(Problem(path, why) for path, why in remembered.problems)
    builds = tuple((e.path, e.build) for e in index.entries if e.build is not None)
    return VerifyReport(store.location, len(wheels), tuple(sorted(problems)), tuple(staged), deep,
                        tuple(sorted(dict.fromkeys(accepted))), builds, remembered.failures)  # fmt: skip


def _bytes_findings(
    blobs: Iterable[_Blob], by_path: Mapping[str, IndexEntry], layout: Layout
) -> tuple[list[Problem], list[Accepted]]:
    """What the bytes say, once per set of bytes, naming every path they are at; a claim a publish flag
    accepted (its entry records the flag) is accepted, not a problem."""
    problems: list[Problem] = []
    accepted: list[Accepted] = []
    for blob in _same_bytes(blobs):
        first, *rest = sorted(blob.paths)
        problems.extend(Problem(first, p, tuple(rest)) for p in dict.fromkeys(blob.problems))
        for said, (at, *also) in _claims_by_path(blob, layout).items():
            overrides = by_path[at].overrides if at in by_path else ()
            for claim in said:
                if claim.flag and claim.flag in overrides:
                    accepted.append(Accepted(at, claim.flag, claim.text))
                else:
                    problems.append(Problem(at, claim.text, tuple(also)))
    return problems, accepted


def _index_findings(
    index: Index, wheels: Sequence[StoredFile], files: Mapping[str, StoredFile], pending: Mapping[str, object]
) -> list[Problem]:
    """Where the index and the tree disagree: a staged entry without its wheel, a bad entry, an entry
    whose wheel is not in the store (moved to another cell?)."""
    problems = [Problem(path, "staged, but its wheel is not in the store (reindex will drop the entry)")
                for path in sorted(set(pending) - set(files))]  # fmt: skip
    for bad in index.bad:  # each poisons only itself: named here, repaired by reindex
        problems.append(Problem(bad.where, f"index entry fails its checks ({bad.problem}); 'librarian reindex' "
                                "re-reads its wheel and writes it anew"))  # fmt: skip
    by_path = index.by_path()
    unindexed = {f.path.rsplit("/", 1)[-1]: f.path for f in wheels if f.path not in by_path}
    for path in sorted(set(by_path) - set(files)):
        moved = unindexed.get(path.rsplit("/", 1)[-1])
        hint = f" (a wheel of that name is at {moved}: moved to another cell?)" if moved else ""
        problems.append(Problem(path, "in the index but not in the store" + hint))
    return problems


def _pending(files: tuple[StoredFile, ...]) -> dict[str, frozenset[str]]:
    """Store path -> sha256 prefixes of the pending entries (``publish --stage``) that describe it."""
    found: dict[str, set[str]] = {}
    for f in files:
        parsed = parse_pending_path(f.path)
        if parsed is not None:
            found.setdefault(parsed[0], set()).add(parsed[1])
    return {path: frozenset(shas) for path, shas in found.items()}


def _staged(
    f: StoredFile, entry: IndexEntry | None, prefixes: frozenset[str] | None, sha: str | None
) -> list[str] | None:
    """``None`` if ``f`` (its bytes' ``sha``, where known) is not awaiting reindex; else its problems against
    its pending entries."""
    if not prefixes:
        return None
    if entry is not None and entry.size == f.size and sha in (None, entry.sha256):
        return None  # the index already describes these bytes; the pending file is a harmless repeat
    if sha is not None and not any(sha.startswith(prefix) for prefix in prefixes):
        return ["staged, but the stored bytes are not the ones staged"]
    return []
