"""Preparing wheels for publish: read each once, label it, verify it as ``verify`` would, inspect its
binaries, and work out the cells it is filed under. Nothing here touches a store.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from librarian import progress
from librarian.build_record import BuildRecord
from librarian.coords import GpuArch, Label, WheelName
from librarian.demands import Wheel
from librarian.errors import BadInput, BadWheel, LibrarianError, Refused
from librarian.facts import WheelFacts
from librarian.index import utc_stamp
from librarian.layout import Layout
from librarian.ops.labels import choose_label
from librarian.ops.store.publish_checks import check_claims, check_combo, check_said, gpu_cells
from librarian.pytorch.matrix import Matrix, load_matrix
from librarian.safeio import sha256_file
from librarian.wheel import DeepRead, OpenedWheel, Rewritten, WheelInfo, said_of, warn_of_links

log = logging.getLogger(__name__)

# Packages no store holds: torch itself (and what a store's pages would put in its place).
RESERVED = frozenset({"torch"})


@dataclass(frozen=True, slots=True)
class PreparedWheel:
    """A wheel ready to file: labelled, verified, hashed, with the cells it goes to."""

    source: Path  # the file given
    staged: Path  # the labelled file to upload (== source when it was already labelled)
    name: WheelName
    sha256: str
    size: int
    sms: tuple[GpuArch, ...]
    facts: WheelFacts | None = None
    requires_python: str | None = None
    metadata: Path | None = None  # its METADATA as a file, to serve beside it (PEP 658)
    metadata_sha256: str = ""
    metadata_size: int | None = None  # its METADATA's length (None: not known, read from the file)
    overrides: tuple[str, ...] = ()  # the flags whose checks this wheel needed overridden (kept in its entry)
    requires_torch: str | None = (
        None  # METADATA's Requires-Dist on torch (">=2.10"): pull and doctor count it
    )
    origin: str = (
        ""  # where it was taken from, as it may be printed (a URL, a store path), if not a file here
    )
    build: BuildRecord | None = None  # how librarian built it, when it did (kept in its index entry)


@dataclass(frozen=True, slots=True)
class PublishOptions:
    """Every publish flag, parsed."""

    label: Label | None = None
    sms: tuple[GpuArch, ...] = ()
    replace: bool = False
    relabel: bool = False  # replace a label the wheel already carries
    trust_sm: bool = False  # file under --sm GPUs the binaries have no code for
    allow_glibc_mismatch: bool = False  # a manylinux tag older than the glibc the binaries need
    allow_cuda_mismatch: bool = False  # a label's CUDA line the device code or libcudart contradicts
    allow_torch_mismatch: bool = False  # a label's torch line the wheel's own Requires-Dist on torch excludes
    allow_platform_mismatch: bool = False  # a platform tag naming another CPU or OS than the binaries
    allow_unknown_combo: bool = False
    refuse_macos: bool = False  # a macOS wheel among the inputs is an error, not skipped with a warning
    variants: bool = False  # file a wheel-variant copy beside each wheel (PEP 825), for uv
    skip_refused: bool = False  # a batch files the wheels that pass, naming the rest (exit 1)
    layout: Layout | None = None
    jobs: int | None = None  # threads reading each wheel's members (None: the cores available)
    now: str = field(default_factory=utc_stamp)

    def accepts(self, flag: str) -> bool:
        """Whether the override ``flag`` (a row's of the table of demands: ``--allow-glibc-mismatch``) was passed."""
        return bool(getattr(self, flag.removeprefix("--").replace("-", "_"), False))


@dataclass(frozen=True, slots=True)
class Taken:
    """Of wheels taken from elsewhere (URLs, pages, stores): the line each one's origin claims (a wheelhouse
    path's cell), and where each came from, as it may be printed."""

    labels: Mapping[Path, Label] = field(default_factory=dict)
    origins: Mapping[Path, str] = field(default_factory=dict)


def _relabelled_info(out: Rewritten, source: Path) -> WheelInfo:
    """The relabelled copy's METADATA and WHEEL, as the retag wrote them (not read back: a dry run wrote
    nothing), held to verify's checks; a failure names the user's file."""
    try:
        return OpenedWheel.written(out).info()
    except LibrarianError as e:
        raise type(e)(_as_source(str(e), out.path, source)) from e


def _as_source(text: str, staged: Path, source: Path) -> str:
    return text.replace(str(staged), str(source)).replace(staged.name, source.name)


def _publishable(read: DeepRead, source: Path) -> tuple[WheelInfo, WheelFacts]:
    """What publish needs of the staged copy; a failure names the user's file, never the staged copy."""
    try:
        return read.publishable()
    except LibrarianError as e:
        if read.path == source:
            raise
        raise type(e)(_as_source(str(e), read.path, source)) from e


def _for_macos(name: WheelName) -> bool:
    """Whether every platform tag of the filename is a macOS one (``macosx_11_0_arm64``)."""
    return all(t.platform.startswith("macosx_") for t in name.tags)


class Refusals(Refused):
    """Wheels of one batch refused: each named with its flag, every one found in the one run."""

    def __init__(self, refusals: Sequence[LibrarianError], total: int) -> None:
        self.refusals = tuple(refusals)
        flags = sorted({f for r in refusals if isinstance(r, Refused) for f in r.flags})
        said = f" ({' '.join(flags)} accept some)" if flags else ""
        super().__init__(
            f"{len(refusals)} of {total} wheel(s) refused, nothing filed{said}; --skip-refused files the rest"
        )

    def details(self) -> list[str]:
        """One line per refused wheel (the CLI prints them after the error line)."""
        return [f"  {r}" for r in self.refusals]


def prepare(
    paths: Sequence[Path],
    options: PublishOptions,
    staging: Path,
    *,
    write: bool = True,
    taken: Taken | None = None,
) -> tuple[list[PreparedWheel], tuple[LibrarianError, ...]]:
    """Read, label, verify and inspect each wheel; labelled copies go to ``staging`` (``write`` ``False``:
    measured, not written: a dry run writes nothing the size of a wheel). Every wheel is checked, so that one
    run names every refusal: with one, it is raised as it is; with several, :class:`Refusals` lists them;
    with ``options.skip_refused``, they come back beside the wheels that passed. ``taken``: what the origin
    of a wheel taken from elsewhere says of its line (used where no flag names one), and where it came from."""
    prepared = []
    refused: list[LibrarianError] = []
    matrix = None if options.allow_unknown_combo else load_matrix()  # read once, not per wheel
    warned: set[str] = set()
    taken = taken or Taken()
    with progress.overall("publish", len(paths)) as bar:
        for path in paths:
            claimed = taken.labels.get(path) if options.label is None else None
            mine = options if claimed is None else replace(options, label=claimed)
            try:
                one = prepare_one(path, mine, staging, write=write, matrix=matrix, warned=warned)
            except (Refused, BadInput) as e:  # a wheel's own problem: the next one is checked all the same
                refused.append(e)
                one = None
            if one is not None:
                prepared.append(replace(one, origin=taken.origins.get(path, "")))
            bar.advance()
    if refused and not options.skip_refused:
        if len(refused) == 1:
            raise refused[0]
        raise Refusals(refused, len(paths))
    return prepared, tuple(refused)


def prepare_one(
    path: Path,
    options: PublishOptions,
    staging: Path,
    *,
    write: bool = True,
    matrix: Matrix | None = None,
    warned: set[str] | None = None,
) -> PreparedWheel | None:
    """One wheel read, labelled, verified and inspected (``None``: a macOS wheel, skipped with a warning).

    ``matrix``: PyTorch's, to warn of a combo it never shipped (``None``: no warning); ``warned``: the
    warnings already given, so that one per combo is said however many wheels share it."""
    name = WheelName.parse(path.name)
    if not _admitted(path, name, options):
        return None
    label = choose_label(name, options.label, relabel=options.relabel)
    warned = set() if warned is None else warned
    if matrix is not None and (warning := check_combo(label, path.name, matrix)) and warning not in warned:
        warned.add(warning)
        log.warning("%s", warning)
    # METADATA and WHEEL (small members) are checked before anything is relabelled or inflated; the
    # members and offsets read here serve the pass below (70,000 members: a second to parse again).
    opened = OpenedWheel.wheel(path, name)
    said = opened.info()
    repair = check_said(path, said)
    warn_of_links(path, said)  # once, naming the file given (the checks below read a relabelled copy too)
    staged_file, info, facts, written_sha, written_size = _read_or_relabel(
        opened, label, repair, options, staging, write
    )
    staged = staged_file.path
    staged_name = WheelName.parse(staged.name)
    wheel = Wheel(staged_name, facts, said=said_of(info), requires_torch=_torch_spec(info, path))
    overrides = check_claims(wheel, options.accepts, path.name)
    sms, trusted = gpu_cells(wheel, options.sms, options.trust_sm, path.name)
    overrides += _said_after_checks(path, label, facts, sms, repair=repair, trusted=trusted, write=write)
    _check_requires_python(path, info)
    metadata = staging / f"{staged.name}.metadata"
    metadata.write_bytes(info.metadata)  # hashed and measured from the bytes, not read back
    # The relabelled copy was hashed as it was written: read once, not again for its sha256.
    sha = written_sha or sha256_file(staged)
    size = staged.stat().st_size if written_size is None else written_size
    return PreparedWheel(path, staged, staged_name, sha, size, sms, facts, info.requires_python, metadata,
                         hashlib.sha256(info.metadata).hexdigest(), len(info.metadata), overrides,
                         info.requires_torch)  # fmt: skip


def _admitted(path: Path, name: WheelName, options: PublishOptions) -> bool:
    """Whether a wheel is one a store files: a macOS wheel is skipped with a warning (``False``), or refused
    with ``--refuse-macos``; torch itself (a reserved name) is refused."""
    if _for_macos(name) and not options.refuse_macos:
        # A farm builds every OS into one dist/: the macOS wheels have no CUDA cell to go in.
        log.warning(
            "%s: a macOS wheel (macOS has no CUDA: no cell to file it in); skipped (--refuse-macos makes it an error)",
            path.name,
        )
        return False
    if name.package in RESERVED:
        raise Refused(
            f"{path.name}: {name.package} itself is never filed: a store serves what is built against it, and "
            f"'pull --install' of it would replace the {name.package} every stored wheel is bound to"
        )
    return True


def _said_after_checks(
    path: Path, label: Label, facts: WheelFacts, sms: Sequence[GpuArch], *, repair: bool, trusted: bool, write: bool
) -> tuple[str, ...]:  # fmt: skip
    """What is said once a wheel's checks pass (a refused wheel is rewritten nowhere), and the overrides it
    records: ``--trust-sm`` where it is filed on the user's word."""
    if repair:
        log.warning("%s: WHEEL's Tag lines disagree with its filename; publish %s the filename's", path,
                    "writes" if write else "would write")  # fmt: skip
    log.info("%s: labelled %s, %d binar%s read, filed under %s", path.name, label, len(facts.binaries),
             "y" if len(facts.binaries) == 1 else "ies", " ".join(f"sm{s.sm}" for s in sms) or "no GPU")  # fmt: skip
    if not trusted:
        return ()
    log.warning(
        "%s: filed under %s with --trust-sm: pull serves it to those GPUs on your word, though "
        "its bytes show no native code for them",
        path.name,
        " ".join(f"sm{s.sm}" for s in sms),
    )
    return ("--trust-sm",)


def _check_requires_python(path: Path, info: WheelInfo) -> None:
    """BadWheel where METADATA's Requires-Python is no specifier set."""
    if info.requires_python:
        try:
            SpecifierSet(info.requires_python)
        except InvalidSpecifier as e:
            raise BadWheel(
                f"{path.name}: METADATA Requires-Python {info.requires_python!r} is not valid"
            ) from e


def _torch_spec(info: WheelInfo, path: Path) -> SpecifierSet | None:
    """METADATA's Requires-Dist on torch as a specifier set (already parsed by packaging: valid)."""
    return SpecifierSet(info.requires_torch) if info.requires_torch else None


def _read_or_relabel(
    opened: OpenedWheel, label: Label, repair: bool, options: PublishOptions, staging: Path, write: bool
) -> tuple[OpenedWheel, WheelInfo, WheelFacts, str | None, int | None]:
    """The wheel to store (the given one, or its relabelled copy in ``staging``), its METADATA and WHEEL,
    its binaries' facts, and the copy's sha256 and size as they were written. One pass over the wheel:
    verify's metadata checks (publish stores nothing verify rejects), RECORD and the binaries; a relabel
    is that pass, inspecting what it checks."""
    path = opened.path
    if opened.name.label == label and not repair:
        info, facts = _publishable(opened.deep(record=True, jobs=options.jobs), path)
        return opened, info, facts, None, None
    out = opened.retag(label, staging, relabel=True, jobs=options.jobs, repair_tags=repair, write=write)
    if out.facts is not None or out.unread is not None:
        # Its metadata is judged before its binaries, as verify does.
        info = _relabelled_info(out, path)
        if out.unread is not None:  # a binary the readers refuse
            raise type(out.unread)(_as_source(str(out.unread), out.path, path)) from out.unread
        assert out.facts is not None
        return OpenedWheel.written(out), info, out.facts, out.sha256, out.size
    # A member too big to inflate whole: the deep read of the very bytes says which.
    staged = OpenedWheel.written(out)
    read = (
        staged.deep(record=False, jobs=options.jobs)
        if write
        else opened.deep(record=False, jobs=options.jobs)
    )
    info, facts = _publishable(read, path)
    return staged, info, facts, out.sha256, out.size
