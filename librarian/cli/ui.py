"""How this run talks to the user: stdout for results, stderr for notes, set by the global options."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import typer

JsonDoc = Mapping[str, object]  # one JSON document (``"schema": 1`` in it), as the ops' ``to_json`` return


@dataclass(slots=True)
class Ui:
    """Set from ``-q``/``-v`` (global) and ``--json`` (seen before typer parses anything)."""

    quiet: bool = False
    verbose: int = 0
    json: bool = False


state = Ui()


def reset(*, as_json: bool) -> None:
    """A fresh run: no ``-q``/``-v`` yet; ``as_json`` when ``--json`` is among the options."""
    state.quiet, state.verbose, state.json = False, 0, as_json


def out(text: str) -> None:
    """A result on stdout."""
    typer.echo(text)


def result(text: str, items: int) -> None:
    """A report on stdout: ``items`` lines, one per thing done (``added ...``), then its result (what was
    written where, the commit). With ``-q``, the result alone."""
    typer.echo("\n".join(text.split("\n")[items:]) if state.quiet else text)


def note(text: str) -> None:
    """A note on stderr, silenced by ``-q``."""
    if not state.quiet:
        typer.echo(f"librarian: note: {text}", err=True)


def err(text: str) -> None:
    """A line on stderr, whatever ``-q`` says (errors)."""
    typer.echo(text, err=True)


def emit_json(data: JsonDoc) -> None:
    """One JSON document on stdout, keys sorted."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True))
