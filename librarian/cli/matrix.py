"""``librarian matrix``, ``matrix refresh`` and ``plan``: the combos PyTorch shipped, re-reading its index,
and the build jobs a store still lacks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from librarian.cli import flags as f
from librarian.cli import options as o
from librarian.cli import rules, ui
from librarian.cli.options import GithubOpt, JsonOpt, SplitOpt
from librarian.errors import BadInput
from librarian.gpus import parse_real_sm
from librarian.machine import parse_major_minor
from librarian.pytorch.matrix import Matrix, Selection, load_matrix
from librarian.pytorch.matrix_render import github_matrix, matrix_json, render_table
from librarian.pytorch.refresh import refresh

if TYPE_CHECKING:
    from librarian.build_record import Source
    from librarian.ops.holdings import Spec

app = typer.Typer(rich_markup_mode=None)
matrix_app = typer.Typer(
    help="The (torch, CUDA, Python, platform) combos PyTorch shipped; 'matrix refresh' reads PyTorch's index.\n\n"
    "Example: librarian matrix --newest 2 --python 3.12 --github",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
)
app.add_typer(matrix_app, name="matrix")
ListOpt = list[str] | None


@matrix_app.callback()
def matrix(
    ctx: typer.Context,
    torch: Annotated[ListOpt, typer.Option("--torch", help="torch minor(s), e.g. 2.8 (repeatable).")] = None,
    cuda: Annotated[ListOpt, typer.Option("--cuda", help="CUDA line(s), e.g. 12.8 (repeatable).")] = None,
    python: Annotated[
        ListOpt, typer.Option("--python", help="Python version(s), e.g. 3.12 (repeatable).")
    ] = None,
    platform: Annotated[
        ListOpt,
        typer.Option(
            "--platform",
            help="Platform(s): PyTorch's name (linux-x86_64) or a wheel tag (manylinux_2_28_x86_64) (repeatable).",
        ),
    ] = None,
    newest: Annotated[int | None, typer.Option("--newest", help="Only the newest N torch lines.")] = None,
    stable_only: Annotated[
        bool, typer.Option("--stable-only", help="Only stable CUDA lines (no experimental or served-only).")
    ] = False,
    github: GithubOpt = False,
    split: SplitOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The combos PyTorch shipped, as a table, JSON, or a GitHub Actions build matrix.

    Example: librarian matrix --newest 2 --python 3.12 --github
    """
    if ctx.invoked_subcommand is not None:
        return
    sel = Selection.parse(torch or (), cuda or (), python or (), platform or (), newest, stable_only)
    loaded = load_matrix()
    if github:
        ui.emit_json(github_matrix(loaded, sel, split=split))
        return
    combos = loaded.select(sel)
    ui.emit_json(matrix_json(combos)) if as_json else ui.out(render_table(combos))


def _refresh_shims(source: str, as_json: bool) -> None:
    """``matrix refresh --shims released|URL|FILE``: the stable-ABI table from the headers of released torch
    (PyPI's, or a PEP 691 page's), or from a copy of PyTorch's list."""
    import datetime
    from pathlib import Path

    from librarian.coords import format_version
    from librarian.safeio import NotRegular, read_regular
    from librarian.stable_abi import refresh_from, refresh_released

    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    if source == "released" or source.startswith(("http://", "https://")):
        from librarian.ops.released_shims import PYPI_TORCH, read_released

        index = PYPI_TORCH if source == "released" else source
        released = read_released(index, say=ui.note)
        sources = {w.line: w.source for w in released.wheels}
        path, table = refresh_released(released.since, sources, index, read=today)
    else:
        try:
            text = read_regular(Path(source), 4 << 20).decode("utf-8")
        except (OSError, NotRegular, UnicodeDecodeError) as e:
            raise BadInput(f"--shims {source}: cannot read ({getattr(e, 'strerror', None) or e})") from e
        path, table = refresh_from(text, source, read=today)
    if as_json:
        ui.emit_json({"schema": 1, "path": str(path), "functions": len(table.since),
                      "through": format_version(table.through), "source": table.source,
                      "sources": dict(table.sources)})  # fmt: skip
        return
    ui.out(
        f"read {len(table.since)} shim function(s) through torch {format_version(table.through)} from {source}; "
        f"wrote {path}"
    )


@matrix_app.command("refresh")
def matrix_refresh(
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="An index page: URL or file (PEP 503 HTML or PEP 691 JSON). Default: PyTorch's index, every CUDA line.",
        ),
    ] = None,
    shims: Annotated[
        str | None,
        typer.Option(
            "--shims",
            metavar="released|URL|FILE",
            help="Instead: the table stable-ABI floors are read by (your user override), from the shim headers "
            "of every released torch ('released': PyPI's; a URL: a PEP 691 page of torch), or from a copy of "
            "PyTorch's torch/csrc/stable/c/shim_function_versions.txt.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Record what PyTorch's wheel index serves, in your user override file (not the installed package).

    Example: librarian matrix refresh
    """
    if shims is not None:
        _refresh_shims(shims, as_json)
        return
    result = refresh(source)
    if as_json:
        ui.emit_json(
            {
                "schema": 1,
                "path": str(result.path),
                "sources": list(result.sources),
                "served": result.served,
                "skipped": result.skipped,
                "added": [str(c) for c in result.added],
                "removed": [str(c) for c in result.removed],
            }
        )
        return
    for combo in result.added:
        ui.out(f"added    {combo}")
    for combo in result.removed:
        ui.out(f"removed  {combo}")
    ui.out(f"read {result.served} served combo(s) from {len(result.sources)} page(s); wrote {result.path}")


@app.command("plan")
def plan(
    specs: f.PlanSpecsArg, sm: f.PlanSmOpt = None, sm_from: f.PlanSmFromOpt = None, torch: f.PlanTorchOpt = None,
    newest: f.PlanNewestOpt = None, cuda: f.PlanCudaOpt = None, python: f.PlanPythonOpt = None,
    platform: f.PlanPlatformOpt = None, stable_only: f.PlanStableOnlyOpt = False, glibc: f.PlanGlibcOpt = None,
    ptx: f.PlanPtxOpt = False, github: o.GithubOpt = False, split: o.SplitOpt = False,
    budget: f.PlanBudgetOpt = None, source: f.PlanSourceOpt = None, retry_failed: f.PlanRetryFailedOpt = False,
    rebuild_other_source: f.PlanRebuildOtherSourceOpt = False, repo: o.RepoOpt = None,
    as_json: o.JsonOpt = False,
) -> None:  # fmt: skip
    """The build jobs whose wheels the store does not hold yet: one per (package, torch, CUDA, Python, platform).

    Example: librarian plan flash-attn==2.8.3 --sm 80 --sm 89 --sm 90 --newest 2 --python 3.12 --github
    """
    # Imported here: plan reads the index and judges wheels; 'matrix' alone must not load all that.
    from librarian.ops.grid import plan as plan_op
    from librarian.ops.grid.plan_budget import parse_budget

    rules.check("plan", dict(locals()))
    if sm_from is not None and sm_from != "store":
        raise BadInput(f"--sm-from {sm_from}: the one source is 'store' (the GPUs the store already serves)")
    parsed_specs = [plan_op.Spec.parse(s) for s in specs]
    sms = [parse_real_sm(s) for s in sm] if sm else None
    floor = parse_major_minor(glibc, "glibc") if glibc else plan_op.DEFAULT_GLIBC
    loaded = load_matrix()
    sel = _selection(loaded, torch, cuda, python, platform, newest, stable_only)
    store, layout = o.store_and_layout(repo, publishing=True)  # a local store not made yet holds nothing
    history = plan_op.History(sources=plan_sources(source, parsed_specs), retry_failed=retry_failed,
                              rebuild_other_source=rebuild_other_source,
                              budget=parse_budget(budget) if budget is not None else None)  # fmt: skip
    result = plan_op.plan(
        store, layout, loaded, sel, parsed_specs, sms, glibc=floor, ptx=ptx, history=history
    )
    if github:
        ui.emit_json(result.github(split=split))
    elif as_json:
        ui.emit_json(result.to_json())
    else:
        ui.out(result.render())


def _selection(
    loaded: Matrix, torch: list[str] | None, cuda: list[str] | None, python: list[str] | None,
    platform: list[str] | None, newest: int | None, stable_only: bool,
) -> Selection:  # fmt: skip
    """The combos plan's flags select: the newest torch line by default, Linux x86_64, and free-threaded
    CPythons only when named."""
    sel = Selection.parse(torch or (), cuda or (), python or (), platform or ("linux-x86_64",),
                          newest if newest is not None or torch else 1, stable_only)  # fmt: skip
    if not python:
        every = {c.python for c in loaded.select(sel)}
        sel = replace(sel, python=frozenset(p for p in every if not p.free_threaded))
    return sel


def plan_sources(source: str | None, specs: list[Spec]) -> dict[Spec, Source]:
    """``--source``: what every spec's jobs build (one spec), read for its identity; BadInput where it is
    no folder or file."""
    from librarian.ops.build.build_facts import source_of

    if source is None:
        return {}
    if len(specs) != 1:
        raise BadInput("--source: names what one spec's jobs build; plan one spec with it")
    if not Path(source).exists():
        raise BadInput(f"--source {source}: no such folder or sdist")
    return {specs[0]: source_of(source, source)}
