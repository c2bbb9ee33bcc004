"""``librarian retag``: options -> :func:`librarian.ops.retag.retag_each` -> one path per wheel, or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import (
    CudaOpt,
    JobsOpt,
    JsonOpt,
    LabelPythonOpt,
    OldForceOpt,
    RelabelOpt,
    TorchOpt,
    WheelsArg,
    deprecated_force,
    label_of,
)
from librarian.ops.retag import retag_each

app = typer.Typer(rich_markup_mode=None)


@app.command()
def retag(
    wheels: WheelsArg,
    cuda: CudaOpt = None,
    torch: TorchOpt = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Directory for the labelled wheels.")] = Path("."),
    relabel: RelabelOpt = False,
    force: OldForceOpt = False,
    python: LabelPythonOpt = None,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite wheels with the label +cuXYZtorchA.B (filename, METADATA, .dist-info, RECORD).

    Example: librarian retag dist/*.whl --torch 2.9 --cuda 12.8 -o labelled/
    """
    if force:
        deprecated_force("retag", "--relabel")
        relabel = True
    written = []
    for done in retag_each(wheels, label_of(cuda, torch, python), out, relabel=relabel, jobs=jobs):
        written.append(done.to_json())
        if not as_json:
            ui.out(str(done.path))
    if as_json:
        ui.emit_json({"schema": 1, "wheels": written})
