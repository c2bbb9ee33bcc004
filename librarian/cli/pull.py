"""``librarian pull``: the wheel this machine wants, fetched and sha256-checked (or installed, or listed)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import (
    CompileCacheOpt,
    CpuOpt,
    CudaOpt,
    DriverOpt,
    GlibcOpt,
    InstallerOpt,
    JsonOpt,
    KeepOpt,
    NoCompileCacheOpt,
    OsOpt,
    PlatformOpt,
    PresetOpt,
    PythonOpt,
    RepairOpt,
    RepoOpt,
    SmOpt,
    TorchIndexOpt,
    TorchOpt,
    cache_folder,
    check_installer,
    machine_of,
    store_and_layout,
)
from librarian.errors import BadInput
from librarian.ops.machine import installer, pull_build
from librarian.ops.machine import pull as pull_op

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
    sm: SmOpt = None,
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
    create: Annotated[
        bool, typer.Option("--create", help="With --build --publish: create the Hub dataset repo if needed.")
    ] = False,
    keep: KeepOpt = False,
    repair: RepairOpt = False,
    build_installer: InstallerOpt = "auto",
    torch_index: TorchIndexOpt = None,
    compile_cache: CompileCacheOpt = None,
    no_cache: NoCompileCacheOpt = False,
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
    if (source or publish or keep or repair or compile_cache or no_cache) and not build:
        raise BadInput(
            "--source, --publish, --keep, --repair, --cache and --no-cache go with --build (pull --build "
            "builds on a miss)"
        )
    if create and not publish:
        raise BadInput("--create: goes with --build --publish (the store the build is filed in)")
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
        from librarian.ops.machine import fix as fix_op  # only --fix reads an environment's binaries

        store, layout = store_and_layout(repo)
        with _wheels_folder(out, True) as out_dir:
            clean = fix_op.fix_environment(
                found, wants, store, layout, out_dir, ui.out, dry_run=dry_run, force=force
            )
        if not clean:
            raise typer.Exit(1)
        return
    with _wheels_folder(out, install) as out_dir:
        on_miss = None
        if build:  # what would be built, and nvcc, checked before the store or any index is read
            from librarian.machine import parse_major_minor
            from librarian.ops.build.build_request import DEFAULT_GLIBC

            # filed into the shared store: held to the floor plan counts at (--glibc, else torch's 2.28)
            floor = (parse_major_minor(glibc, "glibc") if glibc else DEFAULT_GLIBC) if publish else None
            requests, warning = pull_build.build_requests(packages, source, wants, repair, floor)
            if warning:
                ui.note(f"warning: {warning}")
            from librarian.config import load_settings

            variants = load_settings(None).variants
            on_miss = pull_build.OnMiss(
                requests,
                found,
                installer=build_installer,
                torch_index=torch_index,
                keep=keep,
                publish=publish,
                repair=repair,
                variants=variants,
                compile_cache=cache_folder(compile_cache, no_cache, repo),
            )
        store, layout = store_and_layout(repo, create=create, publishing=build and publish)
        report, built = pull_build.pull_or_build(
            store,
            layout,
            packages,
            wants,
            out_dir,
            compatible=compatible,
            requirements=requirements,
            on_miss=on_miss,
            voice=ui.BuildProgress(),
        )
        for note in report.notes:
            ui.note(note)
        if as_json:
            ui.emit_json({**report.to_json(), "built": [str(f) for f in built]})
        else:
            ui.out("\n".join(filter(None, [report.render(), *(f"built -> {f}" for f in built)])))
        if install:
            installer.install_checked([*report.files, *built], found, force=force)


@contextmanager
def _wheels_folder(out: Path | None, install: bool) -> Iterator[Path]:
    """``-o``, else here; with ``--install`` and no ``-o``, a temporary folder: installed, not left behind."""
    if out is None and install:
        with tempfile.TemporaryDirectory(prefix="librarian-pull-") as tmp:
            yield Path(tmp)
    else:
        yield out or Path(".")
