"""``librarian publish`` (or ``--stage``) and ``librarian reindex``: wheels into the store and its index."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from librarian.cli import options as o
from librarian.cli import rules, ui
from librarian.cli import store_flags as sf
from librarian.gpus import parse_real_sm
from librarian.layout import Layout
from librarian.ops.labels import any_unlabelled
from librarian.ops.store.adoption import Adopting
from librarian.ops.store.prepare import Taken
from librarian.ops.store.publish import PublishOptions
from librarian.ops.store.publish import publish as publish_wheels
from librarian.ops.store.reindex import reindex as reindex_store
from librarian.ops.store.reindex_report import reindex_json, render_reindex
from librarian.ops.store.staged import ManifestOptions, reindex_manifests

app = typer.Typer(rich_markup_mode=None)
EVERY_ALLOW = (
    "--relabel --trust-sm --allow-glibc-mismatch --allow-cuda-mismatch --allow-torch-mismatch "
    "--allow-platform-mismatch"
)


@app.command()
def publish(
    wheels: sf.PublishWheelsArg = None, sources: sf.PublishSourcesOpt = None, only: sf.PublishOnlyOpt = None,
    repo: o.RepoOpt = None, cuda: o.CudaOpt = None, torch: o.TorchOpt = None, sm: sf.PublishSmOpt = None,
    dry_run: o.DryRunOpt = False, replace: sf.PublishReplaceOpt = False, relabel: o.RelabelOpt = False,
    trust_sm: sf.PublishTrustSmOpt = False, allow_glibc_mismatch: sf.PublishAllowGlibcMismatchOpt = False,
    allow_cuda_mismatch: sf.PublishAllowCudaMismatchOpt = False,
    allow_platform_mismatch: sf.PublishAllowPlatformMismatchOpt = False,
    allow_torch_mismatch: sf.PublishAllowTorchMismatchOpt = False, skip_refused: sf.PublishSkipRefusedOpt = False,
    force: o.OldForceOpt = False, allow_unknown_combo: o.AllowUnknownComboOpt = False,
    create: o.CreateOpt = False, stage: sf.PublishStageOpt = False, manifest: sf.PublishManifestOpt = None,
    python: o.LabelPythonOpt = None, refuse_macos: sf.PublishRefuseMacosOpt = False,
    variants: o.VariantsOpt = None, jobs: o.JobsOpt = None, as_json: o.JsonOpt = False,
) -> None:  # fmt: skip
    """Label, check and file wheels into the store, in one atomic change with the index (or --stage them).

    Example: librarian publish dist/*.whl --torch 2.9 --cuda 12.8 --repo hf://datasets/me/wheels
    """
    given = dict(locals())
    rules.check("publish", given)  # before the store is opened or a target interpreter probed
    store, layout = o.store_and_layout(repo, create=create, publishing=True)
    options = _options(given, layout)
    with tempfile.TemporaryDirectory(prefix="librarian-intake-") as folder:
        paths, taken, failed = _taken_in(wheels or [], sources or [], only or [], layout, Path(folder))
        # Flags always make a label; without them only unlabelled wheels whose origin claims no line need
        # one (from the installed torch).
        unclaimed = [p for p in paths if p not in taken.labels]
        if cuda is not None or torch is not None or any_unlabelled(unclaimed):
            options = dataclasses.replace(options, label=o.label_of(cuda, torch, python))
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


ALLOWS = ("relabel", "trust_sm", "allow_glibc_mismatch", "allow_cuda_mismatch", "allow_platform_mismatch",
          "allow_torch_mismatch")  # fmt: skip


def _options(given: Mapping[str, Any], layout: Layout) -> PublishOptions:
    """How to publish, from the flags: the deprecated ``--force`` as every ``--allow-*``."""
    every = bool(given["force"])
    if every:
        o.deprecated_force("publish", EVERY_ALLOW)
    allowed: dict[str, Any] = {name: every or bool(given[name]) for name in ALLOWS}
    options = PublishOptions(sms=tuple(parse_real_sm(s) for s in given["sm"] or ()), replace=given["replace"],
                             allow_unknown_combo=given["allow_unknown_combo"], skip_refused=given["skip_refused"],
                             refuse_macos=given["refuse_macos"], variants=o.variants_wanted(given["variants"]),
                             layout=layout, jobs=given["jobs"])  # fmt: skip
    return dataclasses.replace(options, **allowed)


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
    repo: o.RepoOpt = None, adopt: sf.ReindexAdoptOpt = False, refile: sf.ReindexRefileOpt = False,
    relabel: sf.ReindexRelabelOpt = False, refresh: sf.ReindexRefreshOpt = False,
    dry_run: sf.ReindexDryRunOpt = False, manifest: sf.ReindexManifestOpt = None,
    replace: sf.ReindexReplaceOpt = False, allow_unknown_combo: sf.ReindexAllowUnknownComboOpt = False,
    variants: o.VariantsOpt = None, deep: sf.ReindexDeepOpt = False, jobs: o.JobsOpt = None,
    as_json: o.JsonOpt = False,
) -> None:  # fmt: skip
    """Fan-in: merge every staged entry (publish --stage) into the index, in one commit. Exit 1 if any was dropped.

    Example: librarian reindex --manifest manifests/ --repo hf://datasets/me/wheels
    """
    rules.check("reindex", dict(locals()))
    store, layout = o.store_and_layout(repo)
    if manifest:
        options = ManifestOptions(replace=replace, allow_unknown_combo=allow_unknown_combo)
        report = reindex_manifests(store, layout, manifest, options, dry_run=dry_run)
    else:
        how = Adopting(refile=refile, relabel=relabel, allow_unknown_combo=allow_unknown_combo, jobs=jobs)
        report = reindex_store(store, layout, dry_run=dry_run, refresh=refresh, variants=o.variants_wanted(variants),
                               adopting=how if adopt else None, deep=deep)  # fmt: skip
    if as_json:
        ui.emit_json({"schema": 1, "dry_run": dry_run, **reindex_json(report)})
    else:
        ui.out(render_reindex(report, dry_run))
    if report.findings:
        raise typer.Exit(1)
