"""How this run talks to the user: stdout for results, stderr for notes, set by the global options."""

from __future__ import annotations

import json
import sys
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


class BuildProgress:
    """On a terminal, one line redrawn (elapsed time, the current compile step); elsewhere plain lines."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty() and not state.quiet and not state.json
        self.drawn = False

    def say(self, text: str) -> None:
        self.clear()
        note(text)

    def step(self, text: str) -> None:
        if state.quiet or state.json:
            return
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + text[:150])
            sys.stderr.flush()
            self.drawn = True
        else:
            err(f"  {text[:300]}")  # a compile step's whole command is in the log

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[2K")
            self.drawn = False
