"""A typer group that imports a command's module only when that command is looked up (Click's lazy group).

Click documents the pattern: a group whose ``list_commands`` names every command without importing it and
whose ``get_command`` imports the module that defines the one asked for
(https://click.palletsprojects.com/en/stable/complex/#lazily-loading-subcommands). A command is looked up
when it runs, when help lists it and when the shell completes its name; ``librarian pull`` thus imports
the pull module and its op, not every op there is.
"""

from __future__ import annotations

import functools
import importlib
from typing import ClassVar

import typer
from typer import _click  # typer's own click, as TyperGroup's methods take it
from typer._click.utils import make_default_short_help
from typer.core import TyperCommand, TyperGroup
from typer.main import get_group

from librarian.cli.words import with_words

Command = TyperCommand | TyperGroup


@functools.cache
def _group_of(module: str) -> TyperGroup:
    """The commands the module's ``app`` (a :class:`typer.Typer`) declares, built once."""
    app = importlib.import_module(module).app
    if not isinstance(app, typer.Typer):
        raise TypeError(f"{module}.app: not a typer.Typer")
    return get_group(app)


class LazyGroup(TyperGroup):
    """Commands by name, each imported from the module ``modules`` names for it on first look-up."""

    modules: ClassVar[dict[str, str]] = {}  # command name -> module; the order is the order help lists
    summaries: ClassVar[dict[str, str]] = {}  # command name -> its docstring's first line (help lists them)

    def list_commands(self, ctx: object) -> list[str]:
        """Every command's name, without importing any."""
        return list(self.modules)

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """``--help``'s list of commands from :attr:`summaries`, importing none of them (a command without
        one is loaded for its help, as click does); ``tests/test_startup.py`` holds them to the docstrings."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            text = self.summaries.get(name)
            short = (
                make_default_short_help(text, limit) if text else self._load(name).get_short_help_str(limit)
            )
            rows.append((name, short))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: object, cmd_name: str) -> Command | None:
        """The command, its module imported now; ``None`` for an unknown name."""
        if cmd_name not in self.modules:
            # Load them all, so that typer's "Did you mean ...?" (drawn from the loaded ones) sees every name.
            for name in self.modules:
                self._load(name)
            return None
        return self._load(cmd_name)

    def _load(self, name: str) -> Command:
        command = (
            self.commands[name]
            if name in self.commands
            else with_words(_group_of(self.modules[name]).commands[name])
        )
        if not isinstance(command, Command):
            raise TypeError(f"{self.modules[name]}: {name} is not a typer command")
        self.commands[name] = command
        return command
