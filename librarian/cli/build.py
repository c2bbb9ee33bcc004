"""``librarian build``: compile one combo's wheel for exactly the cells asked, check it, file it as publish would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import store_and_layout
from librarian.config import load_layout, load_settings
from librarian.errors import BadInput, Refused
from librarian.ops import build as build_op
from librarian.ops import build_run
from librarian.ops import repair as repair_op
from librarian.ops.build_here import label_checked
from librarian.ops.build_request import request_from_flags, request_from_job
from librarian.ops.publish import PublishOptions, publish
from librarian.pytorch.matrix import load_matrix

app = typer.Typer(rich_markup_mode=None)


class BuildProgress:
    """On a terminal, one line redrawn (elapsed time, the current compile step); elsewhere plain lines."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty() and not ui.state.quiet and not ui.state.json
        self.drawn = False

    def say(self, text: str) -> None:
        self.clear()
        ui.note(text)

    def step(self, text: str) -> None:
        if ui.state.quiet or ui.state.json:
            return
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + text[:150])
            sys.stderr.flush()
            self.drawn = True
        else:
            ui.err(f"  {text}")

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[2K")
            self.drawn = False


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
        str, typer.Option("--platform", help="linux-x86_64, linux-aarch64 or windows-amd64.")
    ] = "linux-x86_64",
    sm: Annotated[
        list[str] | None,
        typer.Option("--sm", help="A GPU to build for, e.g. 89 (repeatable): exactly these cells."),
    ] = None,
    ptx: Annotated[bool, typer.Option("--ptx", help="Add PTX of the newest arch (+PTX).")] = False,
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
    installer: Annotated[
        str,
        typer.Option(
            "--installer", envvar="LIBRARIAN_BUILD_INSTALLER", help="auto (uv where installed), uv or pip."
        ),
    ] = "auto",
    torch_index: Annotated[
        str | None,
        typer.Option(
            "--torch-index",
            envvar="LIBRARIAN_TORCH_INDEX",
            help="Install torch from this index URL or folder of wheels (default: PyTorch's, as plan says).",
        ),
    ] = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the build folder (its path is printed).")
    ] = False,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="auditwheel repair (the CUDA and torch libraries never bundled) and the manylinux tag it meets.",
        ),
    ] = False,
) -> None:
    """Compile SPEC for one combo and exactly the cells asked, check it by its bytes, and file it.

    Example: librarian build flash-attn==2.8.3 --torch 2.9 --cuda 12.8 --python 3.12 --sm 80 --sm 90
    """
    if installer not in ("auto", "uv", "pip"):
        raise BadInput(f"--installer {installer}: auto, uv or pip")
    if manifest is not None and not stage:
        raise BadInput("--manifest: goes with --stage (build --stage --manifest FILE)")
    if out is not None and (stage or repo):
        raise BadInput("-o: writes the wheel to a folder; not with --repo or --stage")
    matrix = load_matrix()
    if job is not None:
        if torch or cuda or python or sm:
            raise BadInput(
                "--job: the job says torch, CUDA, Python and cells; not with --torch/--cuda/--python/--sm"
            )
        request = request_from_job(matrix, job, spec)
    else:
        if spec is None or torch is None or cuda is None:
            raise BadInput("build: pass SPEC --torch X.Y --cuda X.Y --sm N (repeatable), or --job JSON")
        version = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
        request = request_from_flags(matrix, spec, torch, cuda, version, platform, sm or (), ptx)
    if repair:
        repair_op.check_auditwheel()  # before anything is built
    if out is None:
        store, layout = store_and_layout(repo, create=create, publishing=True)
    else:  # no store: the project's layout, for the checks' cells
        store, layout = None, load_layout(load_settings(None).layout)
    settings = build_op.BuildSettings(installer=installer, torch_index=torch_index, keep=keep)
    progress = BuildProgress()
    # Exactly the asked cells: publish refuses any the bytes do not serve natively (no --trust-sm here).
    # The project's variants setting holds here as in publish.
    options = PublishOptions(
        label=request.combo.label, sms=request.sms, layout=layout, variants=load_settings(repo).variants
    )
    with build_run.build_folder(keep) as folder:
        if keep:
            progress.say(f"build folder (kept): {folder}")
        try:
            built = build_op.build(request, settings, folder, progress.say, progress.step)
        finally:
            progress.clear()
        wheel = repair_op.repair(built.wheel, built.log, progress.say) if repair else built.wheel
        if out is None:
            assert store is not None
            try:
                plan = publish(store, [wheel], options, stage=stage, manifest=manifest)
            except Refused as e:  # publish's refusal, with what the build was asked and where its log is
                raise Refused(
                    f"{e} (built with TORCH_CUDA_ARCH_LIST={built.arch_list}; log: {built.log}; "
                    "--keep keeps the wheel)"
                ) from e
            ui.result(
                plan.render(store.location, dry_run=False, stage=stage, manifest=manifest), len(plan.filings)
            )
            return
        # -o: the same checks as publish (into a scratch store), then the labelled wheel into DIR.
        ui.out(str(label_checked(wheel, options, out)))
