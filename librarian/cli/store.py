"""``librarian verify``, ``ls`` and ``gc``: check, show and prune what a store holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from librarian.cli import options as o
from librarian.cli import rules, ui
from librarian.cli import store_flags as sf
from librarian.cli.options import JobsOpt, JsonOpt, RepoOpt, store_and_layout
from librarian.coverage import render_coverage, render_coverage_html
from librarian.errors import BadInput
from librarian.machine import parse_major_minor
from librarian.ops.store.ls import coverage_json, ls
from librarian.safeio import atomic_write

app = typer.Typer(rich_markup_mode=None)


@app.command()
def verify(
    repo: RepoOpt = None,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also read every byte: RECORD hashes, binaries against cells.")
    ] = False,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check every stored wheel against its path, label, metadata and the index. Exit 1 on any problem.

    Example: librarian verify --deep --repo hf://datasets/me/wheels
    """
    store, layout = store_and_layout(repo)
    from librarian.ops.store.verify import (
        verify as verify_store,  # here: ls and gc never load verify's readers
    )

    report = verify_store(store, layout, deep=deep, jobs=jobs)
    ui.emit_json(report.to_json()) if as_json else ui.out(report.render())
    if report.problems:
        raise typer.Exit(1)


@app.command("ls")
def ls_command(
    packages: Annotated[
        list[str] | None, typer.Argument(help="Packages to show (default: all).", show_default=False)
    ] = None,
    repo: RepoOpt = None,
    html_file: Annotated[
        Path | None, typer.Option("--html", help="Also write the table as a web page to FILE.")
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch",
            metavar="LINE",
            help="Only the wheels whose bytes run with torch LINE, e.g. 2.16: stable-ABI builds from their floor "
            "on and torch-free ones whatever line they were filed for, exact ones on their own line.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """What is stored: a coverage table of packages x torch/CUDA combos x GPU archs; '-' marks a hole.

    Example: librarian ls --repo hf://datasets/me/wheels
    """
    line = parse_major_minor(torch, "--torch") if torch is not None else None
    store, layout = store_and_layout(repo)
    cov = ls(store, layout, packages or (), line)
    if html_file is not None:
        try:
            atomic_write(html_file, render_coverage_html(cov).encode("utf-8"))
        except OSError as e:
            raise BadInput(f"{html_file}: cannot write the page ({e.strerror or e})") from e
        ui.note(f"wrote the coverage page to {html_file.absolute()}")
    ui.emit_json(coverage_json(cov)) if as_json else ui.out(render_coverage(cov))


@app.command()
def gc(
    repo: o.RepoOpt = None, keep_torch: sf.GcKeepTorchOpt = None, keep_torch_from: sf.GcKeepTorchFromOpt = "store",
    drop_torch: sf.GcDropTorchOpt = None, keep_versions: sf.GcKeepVersionsOpt = None,
    older_than: sf.GcOlderThanOpt = None, yes: sf.GcYesOpt = False, dry_run: sf.GcDryRunOpt = False,
    purge: sf.GcPurgeOpt = False, purge_grace: sf.GcPurgeGraceOpt = None, allow_empty: sf.GcAllowEmptyOpt = False,
    drop_serving: sf.GcDropServingOpt = False, as_json: o.JsonOpt = False,
) -> None:  # fmt: skip
    """Prune stale torch lines and superseded versions; prints the plan, acts only with --yes.

    Example: librarian gc --keep-torch 3 --purge --yes --repo hf://datasets/me/wheels
    """
    rules.check("gc", dict(locals()))
    from librarian.ops.store.gc import gc as prune  # here: ls and verify never load gc
    from librarian.ops.store.gc_policy import policy_from_flags

    policy = policy_from_flags(keep_torch, keep_torch_from, drop_torch or (), keep_versions, older_than,
                               purge=purge, purge_grace_hours=purge_grace, drop_serving=drop_serving)  # fmt: skip
    store, layout = store_and_layout(repo)
    report = prune(store, layout, policy, act=yes, purge=purge, allow_empty=allow_empty)
    ui.emit_json(report.to_json(store.location)) if as_json else ui.result(
        report.render(store.location, purge_asked=purge),
        len(report.removals) + len(report.kept) + len(report.purge),
    )
