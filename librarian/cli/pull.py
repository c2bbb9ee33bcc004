"""``librarian pull``: the wheel this machine wants, fetched and sha256-checked (or installed, or listed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import (
    CpuOpt,
    CudaOpt,
    DriverOpt,
    GlibcOpt,
    JsonOpt,
    OsOpt,
    PlatformOpt,
    PresetOpt,
    PythonOpt,
    RepoOpt,
    TorchOpt,
    machine_of,
    store_and_layout,
)
from librarian.errors import BadInput
from librarian.ops import installer
from librarian.ops import pull as pull_op

app = typer.Typer(rich_markup_mode=None)


@app.command()
def pull(
    packages: Annotated[
        list[str],
        typer.Argument(
            help="Packages to fetch (pip's name matching: flash-attn finds flash_attn).", show_default=False
        ),
    ],
    sm: Annotated[str | None, typer.Option("--sm", help="GPU arch, e.g. 89 (default: detected GPU).")] = None,
    torch: TorchOpt = None,
    cuda: CudaOpt = None,
    python: PythonOpt = None,
    platform: PlatformOpt = None,
    gpu: Annotated[
        int | None, typer.Option("--gpu", help="Which GPU to serve when there are several (default 0).")
    ] = None,
    repo: RepoOpt = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Directory to put the wheels in.")] = Path("."),
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
    as_json: JsonOpt = False,
) -> None:
    """Fetch the exact wheel for this machine (newest version), sha256-checked.

    Example: librarian pull flash-attn --sm 89 --torch 2.9 --python 3.12 --install
    """
    if install and requirements is not None:
        raise BadInput(
            "--install and --requirements: choose one (the file is for installing without librarian)"
        )
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
        installing=install,
        preset=preset,
        cpu=cpu,
        os=os,
    )
    store, layout = store_and_layout(repo)
    report = pull_op.pull(
        store,
        layout,
        packages,
        pull_op.Wants.of(found),
        out,
        compatible=compatible,
        requirements=requirements,
    )
    for note in report.notes:
        ui.note(note)
    ui.emit_json(report.to_json()) if as_json else ui.out(report.render())
    if install:
        # Imported here, not at the top: only --install reads the wheels' bytes, and a plain pull must not
        # load the binary readers (issue 15; tests/test_startup.py). Not a cycle: a start-up cost.
        from librarian.ops.doctor import check_runs

        check_runs(report.files, found, force=force)
        # installer.install, by module: looked up now, so that tests can stand in for pip.
        installer.install(report.files, found.interpreter.value or sys.executable)
