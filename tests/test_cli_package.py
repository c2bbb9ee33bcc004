"""The CLI package's own machinery: --version before typer, the lazy command group, the command table."""

from __future__ import annotations

import pytest
import typer

import librarian
from librarian.cli import _asks_version, _hoist_global_flags
from librarian.cli.app import Commands, app
from tests.conftest import Run


@pytest.mark.parametrize(
    ("argv", "asks"),
    [
        (["--version"], True),
        (["-q", "--version"], True),
        (["--version", "-vv"], True),  # -q/-v are hoisted to the front from anywhere
        (["--version", "pull", "x"], True),  # click answers an eager --version before the command, too
        (["pull", "--version"], False),  # not the group's option: typer says "No such option"
        (["--version", "--bogus"], False),  # typer reports --bogus first
        (["--help", "--version"], False),
        (["--", "--version"], False),
        ([], False),
    ],
)
def test_which_lines_main_answers_as_the_version(argv: list[str], asks: bool) -> None:
    assert _asks_version(_hoist_global_flags(argv)) is asks


def test_version_anywhere_typer_would_take_it(run: Run) -> None:
    expected = f"librarian {librarian.__version__}\n"
    for argv in (["--version"], ["-q", "--version"], ["--version", "ls"], ["-v", "--version", "-q"]):
        assert run(*argv) == run("--version") and run(*argv).out == expected, argv
    assert run("pull", "--version").code == 2


def test_every_command_in_the_table_is_defined_by_its_module() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, Commands)
    ctx = typer.Context(group)
    assert group.list_commands(ctx) == list(Commands.modules)
    for name, module in Commands.modules.items():
        command = group.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.callback is not None and command.callback.__module__ == module


def test_an_unknown_command_is_none_and_every_name_is_offered(run: Run) -> None:
    result = run("pul")
    assert result.code == 2
    assert (
        result.err
        == "librarian: error: No such command 'pul'. Did you mean 'pull', 'publish'? (see 'librarian --help')\n"
    )
    assert "Did you mean 'refresh'?" in run("matrix", "refres").err
