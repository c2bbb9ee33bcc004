"""The one build use case, for ``build`` and ``pull --build`` alike: refuse what this host cannot build (before
anything is downloaded), build, hold the wheel to what was asked (the package, its version, the interpreter
and platform; never a package of the build environment), repair it when asked, check it once with publish's
own :func:`~librarian.ops.store.prepare.prepare_one`, hold it to the cells plan would count it for (the glibc floor
included: :func:`librarian.ops.grid.plan.holdings`, the very function plan counts with), then file it: into a
store, a stage, a manifest, or a folder. Nothing is filed, written or installed unless every check passed.
"""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from librarian.build_failure import MAX_TAIL, BuildFailure, FailedCells, failure_path
from librarian.build_record import Toolchain
from librarian.coords import MajorMinor, format_dotted, format_version, package_key
from librarian.errors import BadInput, LibrarianError, Refused
from librarian.index import Index
from librarian.machine import TorchInfo
from librarian.ops.build import build_kept
from librarian.ops.build import repair as repair_op
from librarian.ops.build.build import BuildFailed, BuildSettings, Built, build
from librarian.ops.build.build_facts import first_error, now, runner_of
from librarian.ops.build.build_processes import bounded
from librarian.ops.build.build_request import BuildRequest, check_host, check_nvcc, request_from_flags
from librarian.ops.build.build_run import Say, build_folder
from librarian.ops.build.build_source import declared_name
from librarian.ops.holdings import Cell, Spec, accepted_tags, holdings
from librarian.ops.resolve import Wants
from librarian.ops.store.failures import record_failure
from librarian.ops.store.prepare import PreparedWheel, PublishOptions, prepare_one
from librarian.ops.store.publish import PublishPlan, file_prepared, plan_publish
from librarian.probe.toolchain import detect_host, find_nvcc
from librarian.pytorch.matrix import Matrix
from librarian.pytorch.releases import Platform
from librarian.redact import mask
from librarian.safeio import atomic_path
from librarian.stores.base import Store
from librarian.wheel import glibc_symbols

_ANY_GLIBC: MajorMinor = (2, 99)  # tags are judged apart from the floor, which the cells' check holds


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a checked wheel goes: a store (``stage``: for a later reindex; ``manifest``: bytes only and
    the entries in that file), or a folder (``out``), or both nowhere (``None`` store and no folder)."""

    store: Store | None = None
    stage: bool = False
    manifest: Path | None = None
    out: Path | None = None


@dataclass(frozen=True, slots=True)
class BuildOutcome:
    """What a build made and where it went: the labelled wheel in ``out`` (else ``None``), its log, the
    publish it was filed by, the arch list and the torch it was built with."""

    wheel: Path | None
    filename: str
    log: Path
    published: PublishPlan | None
    arch_list: str
    torch: TorchInfo
    built: Built | None = None  # the build itself: its seconds, what the compile cache served, its record


def machine_request(
    matrix: Matrix, spec: str, wants: Wants, package: str, floor: MajorMinor | None = None
) -> BuildRequest:
    """The build of ``spec`` (making ``package``) for exactly the machine ``wants`` describes: one cell.

    BadInput, naming the flag, where the machine does not say enough to build for it (a torch without CUDA,
    no interpreter version, a platform torch ships no CUDA build for)."""
    machine = wants.machine
    if wants.cuda is None:
        raise BadInput(
            "pull --build: the target's torch has no CUDA line (a CPU build of torch?); a CUDA extension "
            "needs torch's CUDA build: install one, or pass --cuda X.Y"
        )
    version = machine.python.value
    if not version or len(version) < 2:
        raise BadInput("pull --build: the target interpreter's version is unknown; pass --python 3.12")
    where = (str(machine.os.value), str(machine.cpu.value))
    platform = Platform.of_machine(*where)
    if platform is None:
        raise BadInput(
            f"pull --build: torch ships no CUDA build for {where[0] or 'an unknown OS'} on "
            f"{where[1] or 'an unknown CPU'}; build on a Linux (x86_64, aarch64) or Windows machine"
        )
    # For this machine alone, its own glibc is the floor that matters; for the shared store (``floor``:
    # --publish), the floor plan counts at, as build holds a wheel to: plan never calls a filed wheel missing.
    glibc = floor or machine.glibc.value
    request = request_from_flags(
        matrix, spec, format_version(wants.torch_line()), format_version(wants.cuda), f"{version[0]}.{version[1]}",
        platform.value, [str(wants.sm.number)], glibc=format_version(glibc) if glibc else None,
    )  # fmt: skip
    return request.expecting(package)


def check_before(
    request: BuildRequest, *, repair: bool = False, host: tuple[str, str] | None = None
) -> str | None:
    """Everything checked before a byte is downloaded: this host builds the request's platform, nvcc is of
    its CUDA major, auditwheel is there for ``repair``. The warning for another CUDA minor, if any."""
    check_host(request, detect_host() if host is None else host)
    warning = check_nvcc(find_nvcc(), request.combo.cuda)
    if repair:
        repair_op.check_auditwheel()
    return warning


def build_and_file(
    request: BuildRequest,
    settings: BuildSettings,
    options: PublishOptions,
    to: Destination,
    say: Say,
    step: Say,
    *,
    repair: bool = False,
) -> BuildOutcome:
    """Build ``request``, hold the wheel to it, check it once as publish does, and file it ``to``."""
    # The host and auditwheel first; nvcc is build()'s own first step, before anything is downloaded.
    check_host(request, detect_host())
    if repair:
        repair_op.check_auditwheel()
    if request.package is None and (declared := declared_name(request.spec)) is not None:
        request = request.expecting(declared)
    options = replace(options, label=request.combo.label, sms=request.sms, trust_sm=False)
    with bounded(), build_folder(settings.keep) as folder:
        if settings.keep:
            say(f"build folder (kept): {folder}")
        earlier = build_kept.kept(request, settings.cache)
        if earlier is not None:
            say(
                f"reusing {earlier.wheel.name}, built before and refused for its glibc floor: not compiling again"
            )
        try:
            built = earlier or build(request, settings, folder, say, step)
            check_built(built.wheel, request, built.environment_packages, built)
        except BuildFailed as e:
            if to.store is not None:
                _remember(to.store, request, e, e.log, say)
            raise
        wheel = repair_op.repair(built.wheel, built.log, say) if repair else built.wheel
        scratch = folder / "checked"
        scratch.mkdir()
        try:
            prepared = prepare_one(wheel, options, scratch)
        except Refused as e:  # publish's refusal, with what the build was asked and where its log is
            raise Refused(
                f"{e} (built with TORCH_CUDA_ARCH_LIST={built.arch_list}; log: {built.log}; --keep keeps the wheel)"
            ) from e
        assert prepared is not None  # a build here makes no macOS wheel
        prepared = replace(prepared, build=built.record)
        try:
            check_cells(prepared, request, options)
        except FloorRefused as e:  # kept: a rerun with --glibc files it without compiling again
            where = build_kept.keep(built, request, settings.cache)
            raise Refused(f"{e} (the wheel is kept in {where}: a rerun with --glibc files it at once)") from e
        out = _write_to(prepared, to.out) if to.out is not None else None
        plan = None
        if to.store is not None:
            settles = (failure_path(cells),) if (cells := failed_cells(request)) is not None else ()
            plan = file_prepared(to.store, [prepared], options, scratch, stage=to.stage, manifest=to.manifest,
                                 settles=settles)  # fmt: skip
        if earlier is not None:
            build_kept.forget(request, settings.cache)
    return BuildOutcome(out, prepared.staged.name, built.log, plan, built.arch_list, built.torch, built)


# The steps whose failure is the source's (or the toolchain's) to remember: an install that fails is the
# network's or the index's, and is tried again on the next run.
REMEMBERED = ("compile", "check")


def failed_cells(request: BuildRequest) -> FailedCells | None:
    """The cells a failure record of ``request`` names; ``None`` where the package or version is not known."""
    if request.package is None or request.version is None:
        return None
    c = request.combo
    return FailedCells(package_key(request.package), str(request.version), format_version(c.torch),
                       format_version(c.cuda), str(c.python), c.platform.value,
                       tuple(str(s.sm) for s in request.sms))  # fmt: skip


def _remember(store: Store, request: BuildRequest, e: BuildFailed, log: Path | None, say: Say) -> None:
    """Record the failed build in ``store`` (one line said), where it is the source's and its cells are
    known; a record that cannot be written is said, and the build's own failure stands."""
    if e.step not in REMEMBERED or e.source is None:
        return
    cells = failed_cells(request)
    if cells is None:
        say(
            "the failure is not recorded: nothing says the package and version built (build --job, or "
            "NAME==VERSION)"
        )
        return
    failure = BuildFailure(cells, e.source, e.toolchain or Toolchain(), now(), e.step,
                           tuple(mask(line) for line in e.tail[-MAX_TAIL:]), runner_of(), request.recipe,
                           mask(first_error(log)) if log is not None else "")  # fmt: skip
    try:
        record_failure(store, failure)
    except LibrarianError as problem:
        say(f"the failure is not recorded in {store.location}: {problem}")
        return
    say(
        f"recorded the failure in {store.location}/{failure.path}: plan leaves these cells out until the "
        "source or the toolchain changes (plan --retry-failed plans them again)"
    )


def check_built(
    wheel: Path, request: BuildRequest, environment: frozenset[str], built: Built | None = None
) -> None:
    """BuildFailed (exit 1) unless the wheel is the one asked: the package (never one of the build
    environment's, torch first), the version the spec pins, tags for the asked interpreter and platform."""
    try:
        _check_built(wheel, request, environment)
    except BuildFailed as e:  # the build's own facts, for its failure record
        e.step = "check"
        if built is not None and built.record is not None:
            e.source, e.toolchain, e.log = built.record.source, built.record.toolchain, built.log
        raise


def _check_built(wheel: Path, request: BuildRequest, environment: frozenset[str]) -> None:
    what = f"{request.spec}: the build made {wheel.name}"
    try:
        name, version, _, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as e:
        raise BuildFailed(f"{what}, which is no wheel's name ({e}); nothing is filed") from e
    name = canonicalize_name(name)
    if name in environment:
        raise BuildFailed(
            f"{what}: {name} is a package of the build environment (torch or what it needs); nothing is "
            "filed or installed, which would replace the torch every extension is bound to"
        )
    if request.package is not None and name != request.package:
        raise BuildFailed(f"{what}, a wheel of {name}, not {request.package}; nothing is filed")
    if request.version is not None and Version(version.public) != request.version:
        raise BuildFailed(f"{what}, version {version}, not {request.version}; nothing is filed")
    c = request.combo
    if accepted_tags(str(c.python), c.platform, _ANY_GLIBC).isdisjoint(tags):
        raise BuildFailed(
            f"{what}, whose tags are for no {c.python} interpreter on {c.platform.value}; nothing is filed"
        )


class FloorRefused(Refused):
    """A built wheel that needs a newer glibc than the floor plan counts at."""


def check_cells(prepared: PreparedWheel, request: BuildRequest, options: PublishOptions) -> None:
    """Refused unless plan, counting at the request's glibc floor, would take the wheel for every cell
    asked: the same :func:`holdings` plan calls, so that plan -> build -> plan closes."""
    assert options.layout is not None
    entries = plan_publish(Index(options.layout), [prepared], options).changes.index
    version = Version(prepared.name.version.public)
    spec = Spec(prepared.name.package, version, f"{prepared.name.package}=={version}")
    cells = [Cell(spec, request.combo, sm) for sm in request.sms]
    _, missing, near = holdings(entries, cells, request.glibc)
    if not missing:
        return
    floor = prepared.facts.glibc if prepared.facts is not None else None
    if floor is not None and floor[:2] > request.glibc:
        raise FloorRefused(glibc_refusal(prepared, request, floor))
    why = near[0].why if near else "no stored wheel of this release fits"
    cells_text = ", ".join(f"sm{c.sm.sm}" for c in missing)
    raise Refused(
        f"{prepared.staged.name}: plan would not count it as holding {cells_text}: {why}; nothing is filed"
    )


def glibc_refusal(prepared: PreparedWheel, request: BuildRequest, floor: tuple[int, ...]) -> str:
    """The one line for a wheel above the floor: the member and a symbol that raise it, the two ways out."""
    need = f"GLIBC_{format_dotted(floor)}"
    member, symbols = _raising(prepared, need)
    by = f" ({member}: {', '.join(symbols[:3])}{', ...' if len(symbols) > 3 else ''})" if member else ""
    have = format_version(request.glibc)
    image = request.combo.platform.container(request.combo.cuda)
    where = f" ({image}, as the example workflow does)" if image else ""
    return (
        f"{prepared.staged.name} needs {need}{by}, above glibc {have}, the floor plan counts at: no cell "
        f"would count as held; build in the combo's builder image{where}, or pass --glibc "
        f"{floor[0]}.{floor[1]} to both build and plan; nothing is filed"
    )


def _raising(prepared: PreparedWheel, version: str) -> tuple[str, list[str]]:
    """The first member needing ``version`` (``GLIBC_2.32``) and the symbols it imports at that version."""
    if prepared.facts is None:
        return "", []
    floor = tuple(int(p) for p in version.removeprefix("GLIBC_").split("."))
    member = next((b.path for b in prepared.facts.binaries if b.glibc == floor), "")
    if not member:
        return "", []
    try:
        with zipfile.ZipFile(prepared.staged) as zf, zf.open(member) as f:
            return member, sorted(glibc_symbols(f.read(), version))
    except (OSError, KeyError, zipfile.BadZipFile, ValueError):
        return member, []


def _write_to(prepared: PreparedWheel, out: Path) -> Path:
    """The checked, labelled wheel into the folder ``out`` (temp file, then rename)."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / prepared.staged.name
    with atomic_path(target) as tmp:
        shutil.copyfile(prepared.staged, tmp)
    return target
