"""``reindex --adopt``: a hand-made wheelhouse taken in as it is, each wheel judged from its bytes against its path.

In a wheelhouse the path is the claim (``nvdiffrast/sm89/torch2.9-cu128/nvdiffrast-0.4.0-cp312-...whl``
claims torch 2.9 and CUDA 12.8, as the label ``+cu128torch2.9`` would). A wheel whose bytes serve its cell
(the one judgement, with publish's own checks) is indexed at its path, with the facts a publish records:
same path, same bytes, so that every link people already use keeps working. One that does not is named
with the demand that fails and the cells its bytes do serve, and left out; ``refile`` files it there
instead (the misfiled copy removed) in the same change. Nothing is renamed. Pure: readings in, a plan out.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from librarian.coords import Cell, GpuArch, Label, WheelName
from librarian.demands import Claimed, Demand, Wheel, cells, claims, demand_of, judge_cell, no_cuda
from librarian.errors import Refused
from librarian.index import Index, IndexEntry
from librarian.layout import Layout
from librarian.ops.store.placement import Problem, label_clash
from librarian.ops.store.publish_checks import check_combo, impossible_gpu, never_shipped
from librarian.ops.store.readings import Reading
from librarian.pytorch.matrix import Matrix
from librarian.stores.base import StoredFile, Upload

log = logging.getLogger(__name__)

# Claims no cell of a store answers: the wheel's own tags say another platform, glibc or Python than its bytes.
_TAG_CLAIMS = frozenset({Claimed.PLATFORM, Claimed.GLIBC, Claimed.PYTHON})


@dataclass(frozen=True, slots=True)
class Misfiled:
    """A wheel whose bytes do not serve the cell its path names: why, and where they do (``label`` ``None``:
    no cell of a store; ``sms`` empty: no GPU by its own SASS)."""

    path: str
    problems: tuple[str, ...]
    label: Label | None = None
    sms: tuple[GpuArch, ...] = ()
    relabel: bool = False  # its filename's own label says another line: filing it there renames it

    @property
    def serves(self) -> str:
        """Where its bytes serve, in words."""
        if self.label is None:
            return "no cell of a store serves it as it is"
        if not self.sms:
            return f"under {self.label.combo} its bytes run on no GPU by their own SASS (PTX alone files no cell)"
        return f"its bytes serve {' '.join(f'sm{s.sm}' for s in self.sms)} under {self.label.combo}"

    @property
    def refilable(self) -> bool:
        """Whether ``--refile`` can file it where it serves, as it is (no rename)."""
        return self.label is not None and bool(self.sms) and not self.relabel

    def problem(self, refile: bool) -> Problem:
        """The one line that names it."""
        hint = ""
        if self.refilable and not refile:
            hint = " (--refile files it there)"
        elif self.relabel and self.sms:
            hint = " (its own label says otherwise: publish it with that label, or fix its name)"
        return Problem(self.path, f"{'; '.join(self.problems)}; {self.serves}{hint}")


@dataclass(frozen=True, slots=True)
class Refiled:
    """A misfiled wheel filed where its bytes serve: from its path to the cells (``sms`` under ``label``) at ``to``."""

    path: str
    label: Label
    sms: tuple[GpuArch, ...]
    to: tuple[str, ...]
    renamed: bool = False  # rewritten with its label (``--relabel``): a new name, new bytes

    def __str__(self) -> str:
        where = f"{self.path} -> {' '.join(f'sm{s.sm}' for s in self.sms)} under {self.label.combo}"
        return where + (f" as {self.to[0].rsplit('/', 1)[-1]}" if self.renamed else "")


@dataclass(frozen=True, slots=True)
class Adoption:
    """What adoption does to the index and the tree, and what it leaves out."""

    adopted: tuple[IndexEntry, ...] = ()  # indexed at their paths, as they are
    refiled: tuple[Refiled, ...] = ()  # misfiled wheels, filed where their bytes serve instead
    filed: tuple[IndexEntry, ...] = ()  # the new entries of the refiled wheels (paths not held yet)
    refused: tuple[Problem, ...] = ()  # left out, each named with what fails
    uploads: tuple[Upload, ...] = ()  # refiled copies, made from the bytes the store holds
    deletes: tuple[str, ...] = ()  # the misfiled copies
    renames: tuple[Refiled, ...] = ()  # --relabel: rewritten with the label of the cells they go to

    @property
    def entries(self) -> tuple[IndexEntry, ...]:
        """Every entry the adoption adds."""
        return (*self.adopted, *self.filed)


def _release(path: str, layout: Layout) -> tuple[Cell, str, str, str] | None:
    parsed = layout.parse_path(path)
    if parsed is None:
        return None
    name = WheelName.parse(parsed[1])
    return parsed[0], name.version.public, name.build, name.tag_text


def duplicates(paths: Sequence[str], index: Index, layout: Layout) -> dict[str, str]:
    """Pure: the candidate paths sharing one cell with another wheel of the same release and tags (two
    wheels pip and pull could take alike, one labelled and one not, say), and which; none of them is taken."""
    groups: dict[tuple[Cell, str, str, str], list[str]] = defaultdict(list)
    for path in [*(e.path for e in index.entries), *paths]:
        if (key := _release(path, layout)) is not None:
            groups[key].append(path)
    found = {}
    for group in groups.values():
        if len(group) > 1:
            for path in group:
                other = next(p for p in group if p != path).rsplit("/", 1)[-1]
                found[path] = f"the same release and tags as {other} in this cell: remove one of them"
    return {p: why for p, why in found.items() if p in set(paths)}


def _spec(text: str | None) -> SpecifierSet | None:
    return SpecifierSet(text) if text else None


def judge_reading(
    path: str, reading: Reading, layout: Layout, matrix: Matrix | None, now: str
) -> IndexEntry | Misfiled:
    """Pure: the entry a wheel gets at its path where its bytes serve the cell the path names, else what fails
    and where they do serve. ``path`` passed :func:`~librarian.ops.store.placement.path_problem`."""
    parsed = layout.parse_path(path)
    assert parsed is not None
    cell, filename = parsed
    name = WheelName.parse(filename)
    if reading.problems or reading.facts is None:
        return Misfiled(path, tuple(reading.problems) or ("its bytes could not be read",))
    wheel = Wheel(
        name, reading.facts, _spec(reading.requires_python), cell.sm,
        requires_torch=_spec(reading.requires_torch), filed_as=cell.label,
    )  # fmt: skip
    claim = name.label or cell.label  # the line it is judged for: its own label's, else its path's
    problems, fixed = _problems(wheel, Cell(cell.package, cell.sm, claim), matrix)
    if (clash := label_clash(name, cell)) is not None:
        problems.insert(0, f"label: {clash}")
    if not problems and not fixed:
        return IndexEntry(
            path, reading.sha256, reading.size, cell, now, reading.facts, reading.requires_python,
            reading.metadata_sha256, requires_torch=reading.requires_torch,
        )  # fmt: skip
    if fixed:
        return Misfiled(path, (*problems, *fixed))
    label = serving_label(wheel, claim, matrix)
    if label is None:
        return Misfiled(path, tuple(problems))
    bare = _unlabelled(wheel, label)
    sms = tuple(c.sm for c in cells(bare, label.cuda))
    if not _has_kernels(wheel):
        sms = (cell.sm,)  # no device code: any GPU runs it; the path's GPU stays its cell
    relabel = label_clash(name, Cell(cell.package, cell.sm, label)) is not None
    return Misfiled(path, tuple(problems), label, sms, relabel)


def _has_kernels(wheel: Wheel) -> bool:
    return wheel.facts is not None and any(b.has_kernels for b in wheel.facts.binaries)


def _problems(wheel: Wheel, cell: Cell, matrix: Matrix | None) -> tuple[list[str], list[str]]:
    """What fails of ``wheel`` in ``cell`` (its line, its GPU, its combo), and what no cell answers (its
    tags against its bytes), each ``<demand>: <why>``."""
    problems: list[str] = []
    fixed: list[str] = []
    said: dict[Claimed, list[str]] = defaultdict(list)
    for claim in claims(wheel):  # said is None: the bytes' claims only (METADATA is the reading's)
        assert isinstance(claim.kind, Claimed)
        said[claim.kind].append(claim.text)
    for kind, texts in said.items():  # one line per demand: its first claim, and how many more
        more = f" (and {len(texts) - 1} more)" if len(texts) > 1 else ""
        (fixed if kind in _TAG_CLAIMS else problems).append(f"{demand_of(kind).title}: {texts[0]}{more}")
    if (why := no_cuda(wheel)) is not None:
        return problems, [*fixed, f"{Demand.OS.title}: {why}"]
    if (impossible := impossible_gpu(wheel, cell.sm, cell.label.cuda)) is not None:
        problems.append(f"{Demand.GPU.title}: sm{cell.sm.sm}: {impossible}")
    elif _has_kernels(wheel):
        judged = judge_cell(wheel, cell)
        gpu = judged.verdict(Demand.GPU)
        if gpu.ok is not True:
            problems.append(
                f"{Demand.GPU.title}: no code an sm{cell.sm.sm} GPU runs (it has {gpu.wheel_needs})"
            )
        elif not judged.native:
            problems.append(
                f"{Demand.GPU.title}: runs on sm{cell.sm.sm} only by JIT-compiling PTX (it has {gpu.wheel_needs})"
            )
    if matrix is not None:
        try:
            if (warning := check_combo(cell.label, str(wheel.name), matrix)) is not None:
                log.info("%s", warning)
        except Refused:
            problems.append(f"combo: {never_shipped(cell.label, matrix)}")
    return problems, fixed


def _unlabelled(wheel: Wheel, label: Label) -> Wheel:
    """The wheel as if filed under ``label`` with no label of its own: the claim is the path's."""
    name = replace(wheel.name, version=Version(wheel.name.version.public))
    return replace(wheel, name=name, filed_as=label)


def serving_label(wheel: Wheel, claim: Label, matrix: Matrix | None) -> Label | None:
    """Pure: the torch/CUDA line a store files the wheel's bytes under (no CUDA or torch claim fails there),
    nearest to ``claim``: its torch line first, then its CUDA line, its CUDA major, the nearest others;
    among the combos PyTorch shipped (and ``claim``, where the matrix cannot say it never was)."""
    candidates = {Label(c.cuda, c.torch) for c in matrix.all_combos} if matrix is not None else set()
    if matrix is None or _shippable(claim, matrix):
        candidates.add(claim)

    def serves(label: Label) -> bool:
        bare = _unlabelled(wheel, label)
        return not any(c.kind in (Claimed.CUDA, Claimed.TORCH) for c in claims(bare))

    def nearness(label: Label) -> tuple[bool, bool, bool, bool, int, int, Label]:
        torch_off = (label.torch[0] - claim.torch[0]) * 100 + label.torch[1] - claim.torch[1]
        cuda_off = (label.cuda[0] - claim.cuda[0]) * 10 + label.cuda[1] - claim.cuda[1]
        return (
            label.torch != claim.torch,
            label.cuda[0] != claim.cuda[0],
            label.cuda != claim.cuda,
            torch_off < 0,  # a stable-ABI build runs from its floor up: the nearest line above it
            abs(torch_off),
            abs(cuda_off),
            label,
        )

    serving = sorted((l for l in candidates if serves(l)), key=nearness)
    return serving[0] if serving else None


def _shippable(label: Label, matrix: Matrix) -> bool:
    try:
        check_combo(label, "", matrix)
    except Refused:
        return False
    return True


def plan_adoption(
    index: Index,
    candidates: Sequence[StoredFile],
    readings: Mapping[str, Reading],
    refused: Mapping[str, str],
    matrix: Matrix | None,
    *,
    refile: bool = False,
    relabel: bool = False,
    now: str = "",
) -> Adoption:
    """Pure: the adoption of ``candidates`` (unindexed wheels of the tree) by their ``readings``; ``refused``:
    those named before a byte was read (their paths, their names, duplicates). With ``refile``, each misfiled
    wheel whose bytes serve other cells as it is is filed there instead, made from the bytes the store holds.
    With ``relabel``, every wheel it files without its cell's label is to be rewritten with it (``renames``:
    a new name, new bytes; the caller rewrites them), its old file removed."""
    layout = index.layout
    adopted: list[IndexEntry] = []
    problems = [Problem(p, why) for p, why in sorted(refused.items())]
    misfiled: list[Misfiled] = []
    for f in candidates:
        if f.path in refused:
            continue
        judged = judge_reading(f.path, readings[f.path], layout, matrix, now)
        if isinstance(judged, IndexEntry):
            adopted.append(judged)
        else:
            misfiled.append(judged)
    held = {e.path: e.sha256 for e in [*index.entries, *adopted]}
    held.update({p: r.sha256 for p, r in readings.items() if p not in refused})
    renames: list[Refiled] = []
    if relabel:
        renames = [_rename(e.path, e.cell.label, (e.cell,), layout) for e in adopted if e.name.label is None]
        adopted = [e for e in adopted if e.name.label is not None]
    if not refile:
        left = (*problems, *(m.problem(False) for m in misfiled))
        return _with_renames(Adoption(tuple(adopted), refused=left), renames, held)
    if relabel:  # each misfiled wheel that serves somewhere goes there under its label's name
        renames += [_rename(m.path, m.label, _cells_of(m), layout) for m in misfiled if m.label and m.sms]
        misfiled = [m for m in misfiled if not (m.label and m.sms)]
    refiling = _refile(misfiled, readings, layout, held, now)
    adoption = replace(refiling, adopted=tuple(adopted), refused=(*problems, *refiling.refused))
    return _with_renames(adoption, renames, held)


def _cells_of(m: Misfiled) -> tuple[Cell, ...]:
    assert m.label is not None
    package = WheelName.parse(m.path.rsplit("/", 1)[-1]).package
    return tuple(Cell(package, sm, m.label) for sm in m.sms)


def _refile(
    misfiled: Sequence[Misfiled],
    readings: Mapping[str, Reading],
    layout: Layout,
    held: dict[str, str],
    now: str,
) -> Adoption:
    """Each misfiled wheel filed where its bytes serve as it is (copied from the store, the misfiled copy
    removed), or named: its cells are nowhere, or a path there holds other bytes. ``held``: the store's
    paths and their sha256, the new copies added as they are planned."""
    refiled: list[Refiled] = []
    filed: list[IndexEntry] = []
    uploads: list[Upload] = []
    problems: list[Problem] = []
    for m in misfiled:
        if not m.refilable:
            problems.append(m.problem(True))
            continue
        there, clash = _refiled(m, readings[m.path], layout, held, now)
        if clash:
            problems.append(Problem(m.path, f"{'; '.join(m.problems)}; {m.serves}, but {clash}"))
            continue
        new = [e for e in there if e.path not in held]  # a copy already there (its own bytes) stays as it is
        assert m.label is not None  # refilable
        refiled.append(Refiled(m.path, m.label, m.sms, tuple(e.path for e in there)))
        filed += new
        uploads += [Upload(e.path, None, e.sha256, e.size, stored_at=m.path) for e in new]
        held.update({e.path: e.sha256 for e in there})
    deletes = tuple(r.path for r in refiled)
    return Adoption((), tuple(refiled), tuple(filed), tuple(problems), tuple(uploads), deletes)


def _rename(path: str, label: Label, cells: tuple[Cell, ...], layout: Layout) -> Refiled:
    """The wheel at ``path`` to be rewritten with ``label`` and filed in ``cells`` under its new name."""
    name = WheelName.parse(path.rsplit("/", 1)[-1]).with_label(label)
    to = tuple(layout.path_for(c, str(name)) for c in cells)
    return Refiled(path, label, tuple(c.sm for c in cells), to, renamed=True)


def _with_renames(adoption: Adoption, renames: Sequence[Refiled], held: Mapping[str, str]) -> Adoption:
    """The adoption with the renames whose new paths are free (those taken are named, the wheel left)."""
    taken = [r for r in renames if any(p in held for p in r.to)]
    problems = [
        Problem(r.path, f"--relabel: {next(p for p in r.to if p in held)} is taken; left as it is")
        for r in taken
    ]
    kept = tuple(r for r in renames if r not in taken)
    return replace(
        adoption,
        refused=(*adoption.refused, *problems),
        renames=kept,
        deletes=(*adoption.deletes, *(r.path for r in kept)),
    )


def _refiled(
    m: Misfiled, reading: Reading, layout: Layout, held: Mapping[str, str], now: str
) -> tuple[list[IndexEntry], str]:
    """The entries of a misfiled wheel where its bytes serve, or why it cannot go there (a path taken by
    other bytes)."""
    assert m.label is not None
    parsed = layout.parse_path(m.path)
    assert parsed is not None
    cell, filename = parsed
    entries = []
    for sm in m.sms:
        target = Cell(cell.package, sm, m.label)
        path = layout.path_for(target, filename)
        if (sha := held.get(path)) is not None and sha != reading.sha256:
            return [], f"{path} holds other bytes"
        entries.append(
            IndexEntry(
                path, reading.sha256, reading.size, target, now, reading.facts, reading.requires_python,
                reading.metadata_sha256, requires_torch=reading.requires_torch,
            )
        )  # fmt: skip
    return entries, ""
