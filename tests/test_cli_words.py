"""Help that helps: words and examples, not type placeholders (issue 26)."""

from __future__ import annotations

import re

from tests.conftest import Run

COMMANDS = [("retag",), ("inspect",), ("doctor",), ("publish",), ("reindex",), ("verify",), ("ls",), ("pull",),
            ("gc",), ("matrix",), ("matrix", "refresh"), ("plan",)]  # fmt: skip


def test_no_type_placeholder_in_any_help_and_each_has_an_example(run: Run) -> None:
    top = run("--help")
    assert top.code == 0 and not re.search(r"<[a-z\[\]|, ]+>", top.out, re.IGNORECASE)
    for command in COMMANDS:
        result = run(*command, "--help")
        assert result.code == 0, command
        assert not re.search(r"<[a-z\[\]|, ]+>", result.out, re.IGNORECASE), (command, result.out)
        assert "Example: librarian " + command[0] in " ".join(result.out.split()), command
    pull = " ".join(run("pull", "--help").out.split())
    assert "--sm 89" in pull and "--torch 2.9" in pull and "{PACKAGE}..." in pull and "--repo DIR|URL" in pull
