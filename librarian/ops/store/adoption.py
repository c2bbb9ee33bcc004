"""The reading half of ``reindex --adopt``: which unindexed wheels of a tree are read (their paths and names
checked first), their bytes read once each (:mod:`librarian.ops.store.readings`), and the plan
:mod:`librarian.ops.store.adopt` makes of them; a step of reindex's one change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from librarian.coords import Cell, WheelName
from librarian.errors import LibrarianError
from librarian.index import Index, IndexEntry, utc_stamp
from librarian.ops.store.adopt import Adoption, Refiled, duplicates, plan_adoption
from librarian.ops.store.placement import Problem, path_problem
from librarian.ops.store.readings import Reading, ReadingCache, read_stored
from librarian.pytorch.matrix import Matrix, load_matrix
from librarian.stores.base import Store, StoredFile, Upload
from librarian.wheel import OpenedWheel


@dataclass(slots=True)
class Adopting:
    """How ``reindex --adopt`` takes wheels in, and what it read in this run (a re-planned change on the Hub
    reads no wheel again)."""

    refile: bool = False  # file a misfiled wheel where its bytes serve (the misfiled copy removed)
    relabel: bool = False  # rewrite each wheel it files with its cell's label (a new name; the old removed)
    allow_unknown_combo: bool = False  # index a wheel under a torch/CUDA combo PyTorch never shipped
    jobs: int | None = None  # wheels read at once (default: the cores available)
    cache: ReadingCache = field(default_factory=ReadingCache)
    now: str = field(default_factory=utc_stamp)
    read: dict[str, Reading] = field(default_factory=dict)
    matrix: Matrix | None = None

    def combos(self) -> Matrix | None:
        """PyTorch's matrix, read once (``None``: every combo taken on trust)."""
        if self.matrix is None and not self.allow_unknown_combo:
            self.matrix = load_matrix()
        return self.matrix


def adopt_unindexed(
    store: Store, index: Index, unindexed: Sequence[StoredFile], how: Adopting, tmp: Path
) -> Adoption:
    """The adoption of the tree's ``unindexed`` wheels: each whose path and name make it a candidate read
    from its bytes and judged; the METADATA of each wheel it files (PEP 658), from its reading, written to
    ``tmp`` and uploaded beside it."""
    refused = {f.path: why for f in unindexed if (why := path_problem(index.layout, f.path)) is not None}
    candidates = [f for f in unindexed if f.path not in refused]
    refused.update(duplicates([f.path for f in candidates], index, index.layout))
    readings = read_stored(
        store, [f for f in candidates if f.path not in refused], how.cache, jobs=how.jobs, held=how.read
    )
    adoption = plan_adoption(
        index,
        candidates,
        readings,
        refused,
        how.combos(),
        refile=how.refile,
        relabel=how.relabel,
        now=how.now,
    )
    by_sha = {r.sha256: r for r in readings.values()}
    uploads = []
    for e in adoption.entries:
        reading = by_sha[e.sha256]
        if e.metadata_path is None or e.metadata_sha256 is None:
            continue
        source = tmp / f"{e.metadata_sha256}.metadata"
        if not source.is_file():
            source.write_bytes(reading.metadata)
        uploads.append(Upload(e.metadata_path, source, e.metadata_sha256, len(reading.metadata)))
    adoption = replace(adoption, uploads=(*adoption.uploads, *uploads))
    return _renamed(store, adoption, readings, tmp, how.now) if adoption.renames else adoption


def _renamed(
    store: Store, adoption: Adoption, readings: Mapping[str, Reading], tmp: Path, now: str
) -> Adoption:
    """The adoption with each rename made: the wheel rewritten with its label (every other member's bytes as
    they are) into ``tmp``, its entries where it goes, uploads of the new bytes, the old file removed."""
    entries: list[IndexEntry] = []
    uploads: list[Upload] = []
    failed: list[Problem] = []
    done: list[Refiled] = []
    for n, rename in enumerate(adoption.renames):
        reading = readings[rename.path]
        name = WheelName.parse(rename.path.rsplit("/", 1)[-1])
        try:
            with store.open(rename.path) as file:
                out = OpenedWheel.wheel(Path(file.name), name).retag(
                    rename.label, tmp / "relabelled" / str(n), relabel=True, verify=False, jobs=1
                )
        except LibrarianError as e:
            failed.append(Problem(rename.path, f"--relabel: {str(e).split(': ', 1)[-1]}"))
            continue
        assert out.sha256 is not None and out.size is not None and out.written is not None
        metadata = out.written[0]
        metadata_sha = hashlib.sha256(metadata).hexdigest()
        (tmp / f"{metadata_sha}.metadata").write_bytes(metadata)
        for path, sm in zip(rename.to, rename.sms, strict=True):
            cell = Cell(name.package, sm, rename.label)
            entries.append(
                IndexEntry(
                    path, out.sha256, out.size, cell, now, reading.facts, reading.requires_python, metadata_sha,
                    requires_torch=reading.requires_torch,
                )
            )  # fmt: skip
            uploads.append(Upload(path, out.path, out.sha256, out.size))
            uploads.append(
                Upload(f"{path}.metadata", tmp / f"{metadata_sha}.metadata", metadata_sha, len(metadata))
            )
        done.append(rename)
    undone = {r.path for r in adoption.renames} - {r.path for r in done}
    return replace(
        adoption,
        filed=(*adoption.filed, *entries),
        uploads=(*adoption.uploads, *uploads),
        renames=tuple(done),
        refused=(*adoption.refused, *failed),
        deletes=tuple(p for p in adoption.deletes if p not in undone),
    )
