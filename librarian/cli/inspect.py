"""``librarian inspect`` and ``librarian doctor``: what a wheel needs, and whether this machine has it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import rules, ui
from librarian.cli.flags import DoctorGlibcOpt, DoctorWheelsArg, EnvOpt, ShowMachineOpt
from librarian.cli.options import (
    CpuOpt,
    CudaOpt,
    DriverOpt,
    GpuOpt,
    JobsOpt,
    JsonOpt,
    MachineFlags,
    OsOpt,
    PlatformOpt,
    PresetOpt,
    PythonOpt,
    SmOpt,
    TorchOpt,
    machine_of,
)
from librarian.machine import Machine
from librarian.ops.inputs import expand_paths

app = typer.Typer(rich_markup_mode=None)


@app.command()
def inspect(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Wheels, bare .so / .pyd files, or directories (every wheel inside).", show_default=False
        ),
    ],
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Also show each native member (the global -v).")
    ] = False,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The seven demands of each wheel, read from its bytes (GPU archs, torch, CUDA, Python, CPU, OS, glibc).

    Example: librarian inspect dist/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl
    """
    from librarian.ops.inspect import inspect_file, inspection_json, render_inspection

    items = [inspect_file(f, jobs=jobs) for f in expand_paths(files, (".whl",))]
    if as_json:
        ui.emit_json({"schema": 1, "files": [inspection_json(i) for i in items]})
    else:  # -v here or before the command: more detail, one meaning
        ui.out("\n\n".join(render_inspection(i, verbose or ui.state.verbose > 0) for i in items))


@app.command()
def doctor(
    wheels: DoctorWheelsArg = None, sm: SmOpt = None, torch: TorchOpt = None, cuda: CudaOpt = None,
    python: PythonOpt = None, platform: PlatformOpt = None, glibc: DoctorGlibcOpt = None,
    driver: DriverOpt = None, gpu: GpuOpt = None, machine: ShowMachineOpt = False, preset: PresetOpt = None,
    cpu: CpuOpt = None, os: OsOpt = None, env: EnvOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Will it run here? Each of the seven demands against this machine (flags override detection). Exit 1 if not.

    Example: librarian doctor dist/ --sm 89 --torch 2.9 --cuda 12.8 --python 3.12
    """
    given = dict(locals())
    rules.check("doctor", given)
    paths = expand_paths(wheels, (".whl",)) if wheels else []
    described = machine_of(MachineFlags.of(given))
    if env:
        doctor_env(described, as_json)
        return
    from librarian.ops.machine.doctor import checkup  # here: --machine and --env never load the wheel readers

    found = checkup(paths, described, show_machine=machine)
    if ui.state.verbose > 0:  # -v: every cell of the table whole
        found = replace(found, width=None)
    ui.emit_json(found.to_json()) if as_json else ui.out(found.render())
    if found.fails:
        raise typer.Exit(1)


def doctor_env(described: Machine, as_json: bool) -> None:
    """``doctor --env``: the target environment's packages with native code, each judged; exit 1 if one will not run."""
    from librarian.ops.machine import environment
    from librarian.probe import installed

    where, sites = environment.target_environment(described)
    judged = environment.judge_environment(installed.read_installed(sites), described)
    label = f"{where} ({', '.join(str(s) for s in sites)})"
    if as_json:
        ui.emit_json(environment.environment_json(judged, label))
    else:
        ui.out(environment.render_environment(judged, label, ui.state.verbose > 0))
    if any(j.runs is False for j in judged):
        raise typer.Exit(1)
