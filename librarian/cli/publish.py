"""``librarian publish`` (or ``--stage``) and ``librarian reindex``: wheels into the store and its index."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import (
    AllowUnknownComboOpt,
    CudaOpt,
    DryRunOpt,
    JobsOpt,
    JsonOpt,
    LabelPythonOpt,
    OldForceOpt,
    RelabelOpt,
    RepoOpt,
    TorchOpt,
    VariantsOpt,
    deprecated_force,
    label_of,
    store_and_layout,
    variants_wanted,
)
from librarian.errors import BadInput
from librarian.gpus import parse_real_sm
from librarian.layout import Layout
from librarian.ops.labels import any_unlabelled
from librarian.ops.store.adoption import Adopting
from librarian.ops.store.prepare import Taken
from librarian.ops.store.publish import PublishOptions
from librarian.ops.store.publish import publish as publish_wheels
from librarian.ops.store.reindex import reindex as reindex_store
from librarian.ops.store.reindex import reindex_json, render_reindex
from librarian.ops.store.staged import ManifestOptions, reindex_manifests

app = typer.Typer(rich_markup_mode=None)
EVERY_ALLOW = (
    "--relabel --trust-sm --allow-glibc-mismatch --allow-cuda-mismatch --allow-torch-mismatch "
    "--allow-platform-mismatch"
)


@app.command()
def publish(
    wheels: Annotated[
        list[str] | None,
        typer.Argument(
            help="Wheel files, or wheels' URLs (https://..., hf://datasets/OWNER/NAME[@REV]/path.whl).",
            show_default=False,
        ),
    ] = None,
    sources: Annotated[
        list[str] | None,
        typer.Option(
            "--from",
            metavar="PAGE|STORE",
            help="Also every wheel a page links (a find-links page, a PEP 503 project page, a release page: a URL "
            "or an HTML file) or another store holds (a folder, a Hub dataset) (repeatable).",
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            metavar="PATTERN",
            help="With --from: only the wheels whose filename matches PATTERN, e.g. 'flash_attn-2.8.3*cp312*' (repeatable).",
        ),
    ] = None,
    repo: RepoOpt = None,
    cuda: CudaOpt = None,
    torch: TorchOpt = None,
    sm: Annotated[
        list[str] | None,
        typer.Option("--sm", help="GPU arch to file under (repeatable); default: from the binaries."),
    ] = None,
    dry_run: DryRunOpt = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a different wheel at the same path.")
    ] = False,
    relabel: RelabelOpt = False,
    trust_sm: Annotated[
        bool,
        typer.Option("--trust-sm", help="File under each --sm even where the binaries have no code for it."),
    ] = False,
    allow_glibc_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-glibc-mismatch", help="Accept a manylinux tag older than the glibc the binaries need."
        ),
    ] = False,
    allow_cuda_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-cuda-mismatch",
            help="Accept a label whose CUDA line the device code or libcudart contradicts.",
        ),
    ] = False,
    allow_platform_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-platform-mismatch",
            help="Accept a platform tag naming another CPU or OS than the binaries.",
        ),
    ] = False,
    allow_torch_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-torch-mismatch",
            help="Accept a label whose torch line the wheel's own Requires-Dist on torch excludes.",
        ),
    ] = False,
    skip_refused: Annotated[
        bool,
        typer.Option(
            "--skip-refused",
            help="File the wheels that pass and name the refused ones (exit 1); without it a refusal files nothing.",
        ),
    ] = False,
    force: OldForceOpt = False,
    allow_unknown_combo: AllowUnknownComboOpt = False,
    create: Annotated[
        bool, typer.Option("--create", help="Create the Hub dataset repo if it does not exist.")
    ] = False,
    stage: Annotated[
        bool,
        typer.Option(
            "--stage",
            help="Fan-in: store the wheels and pending entries only; one final 'librarian reindex' indexes them.",
        ),
    ] = False,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest",
            help="With --stage: upload the bytes only (no commit) and write the entries to FILE, for 'reindex --manifest'.",
        ),
    ] = None,
    python: LabelPythonOpt = None,
    refuse_macos: Annotated[
        bool,
        typer.Option(
            "--refuse-macos", help="A macOS wheel among them is an error (default: skipped, with a warning)."
        ),
    ] = False,
    variants: VariantsOpt = None,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Label, check and file wheels into the store, in one atomic change with the index (or --stage them).

    Example: librarian publish dist/*.whl --torch 2.9 --cuda 12.8 --repo hf://datasets/me/wheels
    """
    if force:
        deprecated_force("publish", EVERY_ALLOW)
        relabel = trust_sm = allow_glibc_mismatch = allow_cuda_mismatch = allow_platform_mismatch = True
        allow_torch_mismatch = True
    if manifest is not None and not stage:  # before the store is opened or a target interpreter probed
        raise BadInput("--manifest: goes with --stage (publish --stage --manifest FILE)")
    if not wheels and not sources:
        raise BadInput("publish: name wheels (files or URLs), or --from a page or a store")
    if only and not sources:
        raise BadInput("--only: goes with --from (it picks among a page's or a store's wheels)")
    store, layout = store_and_layout(repo, create=create, publishing=True)
    options = PublishOptions(
        sms=tuple(parse_real_sm(s) for s in sm or ()),
        replace=replace,
        relabel=relabel,
        trust_sm=trust_sm,
        allow_glibc_mismatch=allow_glibc_mismatch,
        allow_cuda_mismatch=allow_cuda_mismatch,
        allow_platform_mismatch=allow_platform_mismatch,
        allow_torch_mismatch=allow_torch_mismatch,
        allow_unknown_combo=allow_unknown_combo,
        skip_refused=skip_refused,
        refuse_macos=refuse_macos,
        variants=variants_wanted(variants),
        layout=layout,
        jobs=jobs,
    )
    with tempfile.TemporaryDirectory(prefix="librarian-intake-") as folder:
        paths, taken, failed = _taken_in(wheels or [], sources or [], only or [], layout, Path(folder))
        # Flags always make a label; without them only unlabelled wheels whose origin claims no line need
        # one (from the installed torch).
        flagged = cuda is not None or torch is not None
        unclaimed = [p for p in paths if p not in taken.labels]
        if flagged or any_unlabelled(unclaimed):
            options = dataclasses.replace(options, label=label_of(cuda, torch, python))
        plan = publish_wheels(
            store, paths, options, dry_run=dry_run, stage=stage, manifest=manifest, taken=taken
        )
    plan = dataclasses.replace(plan, skipped=(*failed, *plan.skipped))
    if as_json:
        ui.emit_json(plan.to_json(store.location, dry_run=dry_run, stage=stage, manifest=manifest))
    else:
        ui.result(
            plan.render(store.location, dry_run=dry_run, stage=stage, manifest=manifest), len(plan.filings)
        )
    if plan.skipped:  # --skip-refused, or wheels that could not be fetched: the rest was filed; a finding
        raise typer.Exit(1)


def _taken_in(
    inputs: list[str], sources: list[str], only: list[str], layout: Layout, folder: Path
) -> tuple[list[Path], Taken, tuple[str, ...]]:
    """The wheels to publish as files here: files as given, and what URLs, pages and stores name, fetched."""
    from librarian.ops.store.intake import is_remote, take_in  # here: only publish loads it

    if not sources and not any(is_remote(i) for i in inputs):
        return [Path(i) for i in inputs], Taken(), ()
    intake = take_in(inputs, sources, only, layout, folder)
    return list(intake.paths), Taken(intake.labels, intake.origins), intake.failed


@app.command()
def reindex(
    repo: RepoOpt = None,
    adopt: Annotated[
        bool,
        typer.Option(
            "--adopt",
            help="Also take in the wheels of the tree that have no entry (a hand-made wheelhouse), each read from "
            "its bytes and indexed at its path where they serve its cell; the others are named (exit 1).",
        ),
    ] = False,
    refile: Annotated[
        bool,
        typer.Option(
            "--refile",
            help="With --adopt: file each misfiled wheel under the cells its bytes serve, and remove the misfiled copy.",
        ),
    ] = False,
    relabel: Annotated[
        bool,
        typer.Option(
            "--relabel",
            help="With --adopt: rewrite each wheel it files without its cell's label with that label (a new "
            "name: links to the old one break), and remove the old file.",
        ),
    ] = False,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="Re-read every indexed wheel's bytes and write its entry anew (stores from older versions).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be merged; change nothing.")
    ] = False,
    manifest: Annotated[
        list[Path] | None,
        typer.Option(
            "--manifest",
            help="Merge the wheels these 'publish --stage --manifest' files (or folders of them) staged, in one commit (repeatable).",
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="With --manifest: overwrite a different wheel at the same path.")
    ] = False,
    allow_unknown_combo: Annotated[
        bool,
        typer.Option(
            "--allow-unknown-combo",
            help="With --manifest or --adopt: accept a torch/CUDA combo PyTorch never shipped.",
        ),
    ] = False,
    variants: VariantsOpt = None,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="On the Hub too, judge each variant wheel against its source as verify --deep does (each wheel "
            "with a variant downloaded once), and make again those that are not their source's (a local "
            "store is judged so always).",
        ),
    ] = False,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fan-in: merge every staged entry (publish --stage) into the index, in one commit. Exit 1 if any was dropped.

    Example: librarian reindex --manifest manifests/ --repo hf://datasets/me/wheels
    """
    if manifest and (adopt or refresh or deep):
        flag = "--adopt" if adopt else "--refresh" if refresh else "--deep"
        raise BadInput(f"{flag}: not with --manifest (run 'reindex {flag}' on its own)")
    if (refile or relabel) and not adopt:
        flag = "--refile" if refile else "--relabel"
        raise BadInput(f"{flag}: only with --adopt (it files the unindexed wheels adoption reads)")
    if allow_unknown_combo and not (manifest or adopt):
        raise BadInput("--allow-unknown-combo: only with --manifest or --adopt")
    store, layout = store_and_layout(repo)
    if manifest:
        options = ManifestOptions(replace=replace, allow_unknown_combo=allow_unknown_combo)
        report = reindex_manifests(store, layout, manifest, options, dry_run=dry_run)
    else:
        how = (
            Adopting(refile=refile, relabel=relabel, allow_unknown_combo=allow_unknown_combo, jobs=jobs)
            if adopt
            else None
        )
        report = reindex_store(
            store,
            layout,
            dry_run=dry_run,
            refresh=refresh,
            variants=variants_wanted(variants),
            adopting=how,
            deep=deep,
        )
    if as_json:
        ui.emit_json({"schema": 1, "dry_run": dry_run, **reindex_json(report)})
    else:
        ui.out(render_reindex(report, dry_run))
    if report.findings:
        raise typer.Exit(1)
