"""``librarian matrix`` and ``matrix refresh``: the combos PyTorch shipped, and re-reading its index."""

from __future__ import annotations

from typing import Annotated

import typer

from librarian.cli import ui
from librarian.cli.options import JsonOpt
from librarian.pytorch.matrix import Selection, github_matrix, load_matrix, matrix_json, render_table
from librarian.pytorch.refresh import refresh

app = typer.Typer(rich_markup_mode=None)
matrix_app = typer.Typer(
    help="The (torch, CUDA, Python, platform) combos PyTorch shipped; 'matrix refresh' reads PyTorch's index.",
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
    python: Annotated[ListOpt, typer.Option("--python", help="Python version(s), e.g. 3.12 (repeatable).")] = None,
    platform: Annotated[ListOpt, typer.Option("--platform", help="Platform(s), e.g. linux-x86_64 (repeatable).")] = None,
    newest: Annotated[int | None, typer.Option("--newest", help="Only the newest N torch lines.")] = None,
    stable_only: Annotated[bool, typer.Option("--stable-only", help="Only stable CUDA lines (no experimental or served-only).")] = False,
    github: Annotated[bool, typer.Option("--github", help="Print a GitHub Actions strategy.matrix (JSON) of build jobs.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The combos PyTorch shipped, as a table, JSON, or a GitHub Actions build matrix."""
    if ctx.invoked_subcommand is not None:
        return
    sel = Selection.parse(torch or (), cuda or (), python or (), platform or (), newest, stable_only)
    loaded = load_matrix()
    if github:
        ui.emit_json(github_matrix(loaded, sel))
        return
    combos = loaded.select(sel)
    ui.emit_json(matrix_json(combos)) if as_json else ui.out(render_table(combos))


@matrix_app.command("refresh")
def matrix_refresh(
    source: Annotated[str | None, typer.Option("--from", help="An index page: URL or file (PEP 503 HTML or PEP 691 JSON). Default: PyTorch's index, every CUDA line.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Record what PyTorch's wheel index serves, in your user override file (not the installed package)."""
    result = refresh(source)
    if as_json:
        ui.emit_json({"schema": 1, "path": str(result.path), "sources": list(result.sources), "served": result.served,
                      "skipped": result.skipped, "added": [str(c) for c in result.added],
                      "removed": [str(c) for c in result.removed]})  # fmt: skip
        return
    for combo in result.added:
        ui.out(f"added    {combo}")
    for combo in result.removed:
        ui.out(f"removed  {combo}")
    ui.out(f"read {result.served} served combo(s) from {len(result.sources)} page(s); wrote {result.path}")
