"""``librarian pull``: the wheel this machine wants, fetched and sha256-checked (or installed, or listed)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import (
    CpuOpt,
    CudaOpt,
    DriverOpt,
    GlibcOpt,
    InstallerOpt,
    JsonOpt,
    KeepOpt,
    OsOpt,
    PlatformOpt,
    PresetOpt,
    PythonOpt,
    RepairOpt,
    RepoOpt,
    TorchIndexOpt,
    TorchOpt,
    check_installer,
    machine_of,
    store_and_layout,
)
from librarian.coords import package_key
from librarian.errors import BadInput
from librarian.machine import Machine
from librarian.ops import installer
from librarian.ops import pull as pull_op

if TYPE_CHECKING:
    from librarian.layout import Layout
    from librarian.ops.build import BuildSettings
    from librarian.ops.build_request import BuildRequest
    from librarian.stores.base import Store

app = typer.Typer(rich_markup_mode=None)


@app.command()
def pull(
    packages: Annotated[
        list[str] | None,
        typer.Argument(
            help="Packages to fetch (pip's name matching: flash-attn finds flash_attn; NAME==VERSION pins).",
            show_default=False,
        ),
    ] = None,
    sm: Annotated[str | None, typer.Option("--sm", help="GPU arch, e.g. 89 (default: detected GPU).")] = None,
    torch: TorchOpt = None,
    cuda: CudaOpt = None,
    python: PythonOpt = None,
    platform: PlatformOpt = None,
    gpu: Annotated[
        int | None, typer.Option("--gpu", help="Which GPU to serve when there are several (default 0).")
    ] = None,
    repo: RepoOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            help="Directory to put the wheels in (default: here; with --install, a temporary one).",
        ),
    ] = None,
    install: Annotated[
        bool,
        typer.Option(
            "--install", help="Then pip install --force-reinstall --no-deps them into the target interpreter."
        ),
    ] = False,
    requirements: Annotated[
        Path | None,
        typer.Option(
            "--requirements",
            help="Download nothing; write 'name @ URL --hash=sha256:...' lines to FILE for pip/uv.",
        ),
    ] = None,
    compatible: Annotated[
        bool,
        typer.Option("--compatible", help="With no exact cell, take a wheel that runs on this GPU anyway."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="--install even a wheel the verdicts say will not run here.")
    ] = False,
    driver: DriverOpt = None,
    glibc: GlibcOpt = None,
    preset: PresetOpt = None,
    cpu: CpuOpt = None,
    os: OsOpt = None,
    build: Annotated[
        bool,
        typer.Option(
            "--build", help="On a miss, build it for exactly this machine (GPU, torch, CUDA, Python) here."
        ),
    ] = False,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="With --build: what to build, an sdist or source folder (default: the name, from PyPI).",
        ),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish", help="With --build: file what was built in the store, for the next machine."
        ),
    ] = False,
    keep: KeepOpt = False,
    repair: RepairOpt = False,
    build_installer: InstallerOpt = "auto",
    torch_index: TorchIndexOpt = None,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Replace each installed package of the target environment that will not run here "
            "(doctor --env) with the stored wheel that does, then judge it again.",
        ),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --fix: say what it would do.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fetch the exact wheel for this machine (newest version), sha256-checked.

    Example: librarian pull flash-attn --sm 89 --torch 2.9 --python 3.12 --install
    """
    if dry_run and not fix:
        raise BadInput("--dry-run goes with --fix (pull --fix --dry-run)")
    if fix and (packages or build or requirements is not None):
        raise BadInput(
            "--fix: replaces what the target environment needs; not with PACKAGE, --build or --requirements"
        )
    if not fix and not packages:
        raise BadInput("pull: name at least one package, or pass --fix")
    packages = packages or []
    if install and requirements is not None:
        raise BadInput(
            "--install and --requirements: choose one (the file is for installing without librarian)"
        )
    if (source or publish or keep or repair) and not build:
        raise BadInput(
            "--source, --publish, --keep and --repair go with --build (pull --build builds on a miss)"
        )
    check_installer(build_installer)
    if build and requirements is not None:
        raise BadInput("--build and --requirements: the file names stored wheels; build first, then write it")
    if source is not None and len(packages) > 1:
        raise BadInput("--source: names what to build for one package; pull one package with it")
    # The machine first: a --python that --install contradicts is refused before the store is touched.
    found = machine_of(
        sm,
        torch,
        cuda,
        python,
        platform,
        glibc=glibc,
        driver=driver,
        gpu=gpu,
        installing=install or fix,
        preset=preset,
        cpu=cpu,
        os=os,
    )
    wants = pull_op.Wants.of(found)
    if fix:
        with _wheels_folder(out, True) as out_dir:
            fix_environment(found, wants, repo, out_dir, dry_run=dry_run, force=force)
        return
    with _wheels_folder(out, install) as out_dir:
        # --build: what would be built, and nvcc, checked before the store or any index is read.
        requests = build_requests(packages, source, wants, repair) if build else {}
        store, layout = store_and_layout(repo)
        try:
            report = pull_op.pull(
                store, layout, packages, wants, out_dir, compatible=compatible, requirements=requirements
            )
            built: list[Path] = []
        except pull_op.NoMatch as miss:
            if not build:
                raise
            settings = build_settings(found, requests, build_installer, torch_index, keep)
            report, built = build_misses(
                store, layout, packages, wants, out_dir, miss, requests, settings, publish, compatible, repair
            )
        for note in report.notes:
            ui.note(note)
        if as_json:
            ui.emit_json({**report.to_json(), "built": [str(f) for f in built]})
        else:
            ui.out("\n".join(filter(None, [report.render(), *(f"built -> {f}" for f in built)])))
        files = [*report.files, *built]
        if install:
            # Imported here, not at the top: only --install reads the wheels' bytes, and a plain pull must not
            # load the binary readers (tests/test_startup.py). Not a cycle: a start-up cost.
            from librarian.ops.doctor import check_runs

            check_runs(files, found, force=force)
            # installer.install, by module: looked up now, so that tests can stand in for pip.
            installer.install(files, found.interpreter.value or sys.executable)


@contextmanager
def _wheels_folder(out: Path | None, install: bool) -> Iterator[Path]:
    """``-o``, else here; with ``--install`` and no ``-o``, a temporary folder: installed, not left behind."""
    if out is None and install:
        with tempfile.TemporaryDirectory(prefix="librarian-pull-") as tmp:
            yield Path(tmp)
    else:
        yield out or Path(".")


def build_requests(
    packages: list[str], source: str | None, wants: pull_op.Wants, repair: bool
) -> dict[str, BuildRequest]:
    """What ``--build`` would build for each package, checked (host, nvcc, auditwheel) before anything is
    downloaded or read."""
    # Imported here: a plain pull loads neither the build nor the binary readers (tests/test_startup.py).
    from librarian.ops import build_and_file
    from librarian.pytorch.matrix import load_matrix

    matrix = load_matrix()
    pins = [pull_op.parse_pin(p) for p in packages]
    requests = {
        pin.key: build_and_file.machine_request(matrix, source or text, wants, pin.name)
        for pin, text in zip(pins, packages, strict=True)
    }
    warning = build_and_file.check_before(next(iter(requests.values())), repair=repair)
    if warning:
        ui.note(f"warning: {warning}")
    return requests


def build_settings(
    found: Machine, requests: dict[str, BuildRequest], installer: str, torch_index: str | None, keep: bool
) -> BuildSettings:
    """How ``pull --build`` builds: against the target's own torch where it is the combo's (no download)."""
    from librarian.ops.build import BuildSettings, target_torch

    target = found.interpreter.value
    combo = next(iter(requests.values())).combo
    torch_from = target_torch(Path(target), combo) if target else None
    return BuildSettings(installer=installer, torch_index=torch_index, keep=keep, torch_from=torch_from)


def build_misses(
    store: Store,
    layout: Layout,
    packages: list[str],
    wants: pull_op.Wants,
    out: Path,
    miss: pull_op.NoMatch,
    requests: dict[str, BuildRequest],
    settings: BuildSettings,
    publish: bool,
    compatible: bool,
    repair: bool,
) -> tuple[pull_op.PullReport, list[Path]]:
    """Pull what the store has, build the rest for this machine (and file it with ``publish``)."""
    from librarian.cli.build import BuildProgress  # only on a miss with --build: see build_requests
    from librarian.config import load_settings
    from librarian.ops.build_and_file import Destination, build_and_file
    from librarian.ops.prepare import PublishOptions

    missed = {package_key(r.package) for r in miss.misses}
    ui.note(f"{miss}; building {', '.join(sorted(missed))} for this machine")
    hits = [p for p in packages if pull_op.pin_key(p) not in missed]
    report = (
        pull_op.pull(store, layout, hits, wants, out, compatible=compatible)
        if hits
        else pull_op.PullReport(store.location, wants, (), ())
    )
    options = PublishOptions(layout=layout, variants=load_settings(None).variants)
    to = Destination(store if publish else None, out=out)
    progress = BuildProgress()
    built = []
    for key in sorted(missed):
        try:
            done = build_and_file(
                requests[key], settings, options, to, progress.say, progress.step, repair=repair
            )
        finally:
            progress.clear()
        if done.published is not None:  # what publish says, a note per line (stdout is pull's own)
            for line in done.published.render(
                store.location, dry_run=False, stage=False, manifest=None
            ).splitlines():
                ui.note(line.strip())
        assert done.wheel is not None
        built.append(done.wheel)
    return report, built


def fix_environment(
    found: Machine, wants: pull_op.Wants, repo: str | None, out: Path, *, dry_run: bool, force: bool
) -> None:
    """``pull --fix``: judge the target environment, replace what will not run, judge it again."""
    from librarian.cli.inspect import environment_of
    from librarian.ops import environment, fix
    from librarian.ops.doctor import check_runs

    where, sites = environment_of(found)
    before = environment.judge_environment(environment.read_installed(sites), found)
    ui.out("before:\n" + environment.render_environment(fix.failing(before), where))
    store, layout = store_and_layout(repo)
    plan = fix.plan_fix(store, layout, before, wants)
    ui.out(plan.render(dry_run))
    if dry_run or not plan.replacements:
        if plan.unfixable and not dry_run:
            raise typer.Exit(1)
        return
    files = fix.fetch_replacements(store, plan, out)
    check_runs(files, found, force=force)  # nothing is installed whose judgement fails
    installer.install(files, where)
    after = environment.judge_environment(environment.read_installed(sites), found)
    broken = fix.failing(after)
    ui.out(
        "after:\n"
        + (
            environment.render_environment(broken, where)
            if broken
            else f"{where}: every package with native code runs here"
        )
    )
    if broken:
        raise typer.Exit(1)
