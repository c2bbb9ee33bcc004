"""The ``librarian`` command group: the global options, and which module defines each command."""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated, ClassVar

import typer

from librarian import __version__, progress
from librarian.cli import ui
from librarian.cli.lazy import LazyGroup

HELP = "Keep a cache of compiled CUDA / PyTorch extension wheels: retag, publish, verify, pull, prune."


class Commands(LazyGroup):
    """librarian's commands, in the order ``librarian --help`` lists them."""

    modules: ClassVar[dict[str, str]] = {
        "retag": "librarian.cli.retag",
        "inspect": "librarian.cli.inspect",
        "doctor": "librarian.cli.inspect",
        "publish": "librarian.cli.publish",
        "reindex": "librarian.cli.publish",
        "verify": "librarian.cli.store",
        "ls": "librarian.cli.store",
        "pull": "librarian.cli.pull",
        "gc": "librarian.cli.store",
        "matrix": "librarian.cli.matrix",
        "plan": "librarian.cli.matrix",
        "build": "librarian.cli.build",
    }
    # What --help lists, without importing a command module: each docstring's first line (a test holds them).
    summaries: ClassVar[dict[str, str]] = {
        "retag": "Rewrite wheels with the label +cuXYZtorchA.B (filename, METADATA, .dist-info, RECORD).",
        "inspect": "The seven demands of each wheel, read from its bytes (GPU archs, torch, CUDA, Python, CPU, OS, "
        "glibc).",
        "doctor": "Will it run here? Each of the seven demands against this machine (flags override detection). "
        "Exit 1 if not.",
        "publish": "Label, check and file wheels into the store, in one atomic change with the index (or --stage "
        "them).",
        "reindex": "Fan-in: merge every staged entry (publish --stage) into the index, in one commit. Exit 1 if any "
        "was dropped.",
        "verify": "Check every stored wheel against its path, label, metadata and the index. Exit 1 on any problem.",
        "ls": "What is stored: a coverage table of packages x torch/CUDA combos x GPU archs; '-' marks a hole.",
        "pull": "Fetch the exact wheel for this machine (newest version), sha256-checked.",
        "gc": "Prune stale torch lines and superseded versions; prints the plan, acts only with --yes.",
        "matrix": "The (torch, CUDA, Python, platform) combos PyTorch shipped; 'matrix refresh' reads PyTorch's "
        "index.",
        "plan": "The build jobs whose wheels the store does not hold yet: one per (package, torch, CUDA, Python, "
        "platform).",
        "build": "Compile SPEC for one combo and exactly the cells asked, check it by its bytes, and file it.",
    }


app = typer.Typer(
    name="librarian",
    cls=Commands,
    help=HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[@REV]" is part of an address, not markup
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    # main() answers a plain --version before typer is imported; this one serves the other spellings.
    if value:
        ui.out(f"librarian {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print librarian's version and exit."
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "-q", "--quiet", help="Only errors on stderr: no notes, no progress bars (anywhere on the line)."
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "-v",
            "--verbose",
            count=True,
            show_default=False,
            help="More on stderr: -v says what is done, -vv debugs (anywhere on the line).",
        ),
    ] = 0,
) -> None:
    """Keep a cache of compiled CUDA / PyTorch extension wheels: retag, publish, verify, pull, prune."""
    ui.state.quiet, ui.state.verbose = quiet, verbose
    level = (
        "ERROR"
        if quiet
        else {0: os.environ.get("LIBRARIAN_LOG", "WARNING").upper(), 1: "INFO"}.get(verbose, "DEBUG")
    )
    logging.getLogger("librarian").setLevel(level)
    if not quiet and not ui.state.json and sys.stderr.isatty():  # bars for a person at a terminal only
        # Imported here, not at the top: rich is loaded only when bars are drawn (tests/test_startup.py).
        # Not a cycle: a start-up cost.
        from librarian.terminal import RichReporter

        progress.set_reporter(RichReporter())
