"""``librarian build``: compile one combo's wheel for exactly the cells asked, check it, file it as publish would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import (
    CompileCacheOpt,
    InstallerOpt,
    JsonOpt,
    KeepOpt,
    NoCompileCacheOpt,
    RepairOpt,
    SandboxOpt,
    TorchIndexOpt,
    cache_folder,
    check_installer,
    store_and_layout,
)
from librarian.config import load_layout, load_settings
from librarian.errors import BadInput
from librarian.ops.build.build import BuildSettings
from librarian.ops.build.build_and_file import BuildOutcome, Destination, build_and_file
from librarian.ops.build.build_request import request_from_flags, request_from_job
from librarian.ops.store.prepare import PublishOptions
from librarian.pytorch.matrix import load_matrix

app = typer.Typer(rich_markup_mode=None)


@app.command()
def build(
    spec: Annotated[
        str | None,
        typer.Argument(
            help="A requirement (flash-attn==2.8.3), an sdist or a source folder; with --job, default: its spec.",
            show_default=False,
        ),
    ] = None,
    torch: Annotated[str | None, typer.Option("--torch", help="The combo's torch minor, e.g. 2.9.")] = None,
    cuda: Annotated[str | None, typer.Option("--cuda", help="The combo's CUDA line, e.g. 12.8.")] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="The CPython to build for, e.g. 3.12 (default: this one).")
    ] = None,
    platform: Annotated[
        str,
        typer.Option(
            "--platform",
            help="This host's own: PyTorch's name (linux-x86_64, linux-aarch64, windows-amd64) or a wheel tag of it.",
        ),
    ] = "linux-x86_64",
    sm: Annotated[
        list[str] | None,
        typer.Option("--sm", help="A GPU to build for, e.g. 89 (repeatable): exactly these cells."),
    ] = None,
    ptx: Annotated[bool, typer.Option("--ptx", help="Add PTX of the newest arch (+PTX).")] = False,
    glibc: Annotated[
        str | None,
        typer.Option(
            "--glibc",
            help="The glibc floor of the plan this build serves (default 2.28, torch's; as plan's).",
        ),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option("--job", help="One entry of 'plan --json' jobs or 'plan --github' include, as JSON."),
    ] = None,
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo", help="File the wheel into this store (as publish does); default: the project's."
        ),
    ] = None,
    stage: Annotated[
        bool, typer.Option("--stage", help="Stage it for one later 'librarian reindex' (a CI fan-in).")
    ] = False,
    manifest: Annotated[
        Path | None,
        typer.Option("--manifest", help="With --stage: upload the bytes only and write the entries to FILE."),
    ] = None,
    create: Annotated[bool, typer.Option("--create", help="Create the Hub dataset repo if needed.")] = False,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--out", help="Write the checked, labelled wheel to DIR instead of a store."),
    ] = None,
    installer: InstallerOpt = "auto",
    torch_index: TorchIndexOpt = None,
    keep: KeepOpt = False,
    sandbox: SandboxOpt = False,
    compile_cache: CompileCacheOpt = None,
    no_cache: NoCompileCacheOpt = False,
    repair: RepairOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Compile SPEC for one combo and exactly the cells asked, check it by its bytes, and file it.

    Example: librarian build flash-attn==2.8.3 --torch 2.9 --cuda 12.8 --python 3.12 --sm 80 --sm 90
    """
    check_installer(installer)
    if manifest is not None and not stage:
        raise BadInput("--manifest: goes with --stage (build --stage --manifest FILE)")
    if out is not None and (stage or repo):
        raise BadInput("-o: writes the wheel to a folder; not with --repo or --stage")
    matrix = load_matrix()
    if job is not None:
        if torch or cuda or python or sm or glibc:
            raise BadInput(
                "--job: the job says torch, CUDA, Python, cells and glibc; not with "
                "--torch/--cuda/--python/--sm/--glibc"
            )
        request = request_from_job(matrix, job, spec)
    else:
        if spec is None or torch is None or cuda is None:
            raise BadInput("build: pass SPEC --torch X.Y --cuda X.Y --sm N (repeatable), or --job JSON")
        version = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
        request = request_from_flags(matrix, spec, torch, cuda, version, platform, sm or (), ptx, glibc)
        request = request.expecting()
    if out is None:
        store, layout = store_and_layout(repo, create=create, publishing=True)
        to = Destination(store, stage, manifest)
    else:  # no store: the project's layout, for the checks' cells
        layout = load_layout(load_settings(None).layout)
        to = Destination(out=out)
    settings = BuildSettings(
        installer=installer,
        torch_index=torch_index,
        keep=keep,
        sandbox=sandbox,
        compile_cache=cache_folder(compile_cache, no_cache, repo),
    )
    options = PublishOptions(layout=layout, variants=load_settings(repo).variants)
    progress = ui.BuildProgress()
    try:
        done = build_and_file(request, settings, options, to, progress.say, progress.step, repair=repair)
    finally:
        progress.clear()
    render(done, to)


def render(done: BuildOutcome, to: Destination) -> None:
    """What was filed (publish's lines), or the wheel's path; ``--json``: one document."""
    if ui.state.json:
        published, built = done.published, done.built
        location = to.store.location if to.store is not None else None
        ui.emit_json(
            {
                "schema": 1,
                "wheel": str(done.wheel) if done.wheel else done.filename,
                "log": str(done.log),
                "TORCH_CUDA_ARCH_LIST": done.arch_list,
                "torch": done.torch.version,
                "seconds": round(built.seconds) if built else None,
                "compile_cache": built.cache.to_json() if built and built.cache else None,
                "build": built.record.to_json() if built and built.record else None,
                "published": published.to_json(
                    location or "", dry_run=False, stage=to.stage, manifest=to.manifest
                )
                if published is not None
                else None,
            }
        )
        return
    if done.published is not None and to.store is not None:
        ui.result(
            done.published.render(to.store.location, dry_run=False, stage=to.stage, manifest=to.manifest),
            len(done.published.filings),
        )
    elif done.wheel is not None:
        ui.out(str(done.wheel))
