"""The command line: options -> ops -> output. The one place that prints, and the one error funnel.

Exit status: 0 done, 1 a finding (verify found problems, pull found no match, doctor says no),
2 bad usage or bad input (a missing store too), 3 the store could not be reached or refused us.
Errors are one line on stderr: ``librarian: error: <file or value>: <problem>``; a traceback only with
``LIBRARIAN_DEBUG=1``.

Start-up loads only what a command uses: ``librarian --version`` is answered here, before typer is
imported; the group (:mod:`librarian.cli.app`) imports a command's module only when that command runs
(:mod:`librarian.cli.lazy`), and each command module imports its op at the top.

    __init__  main: global flags, --version, logging      funnel  errors -> one line and an exit status
    app       the group, its global options, the table     lazy    the lazy group
    options   the shared options and their parsing         ui      stdout, stderr, JSON
    flags, store_flags   each command's own options         rules   which flags go together (one table)
    retag, inspect (+doctor), publish (+reindex), pull, store (verify, ls, gc), matrix: one module each
"""

from __future__ import annotations

import logging
import os
import re
import sys

from librarian import __version__, progress
from librarian.redact import ERROR_CHARS, clean


def _is_global_flag(arg: str) -> bool:
    return arg in ("-q", "--quiet", "--verbose") or re.fullmatch(r"-v+", arg) is not None


def _options(args: list[str]) -> list[str]:
    """The arguments before a ``--`` (after it, everything is an operand)."""
    return args[: args.index("--")] if "--" in args else args


def _hoist_global_flags(args: list[str]) -> list[str]:
    """``-q``/``-v`` anywhere before a ``--`` act as the global options (as pip and uv take them)."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if _is_global_flag(a)]
    return flags + [a for i, a in enumerate(args) if i >= end or not _is_global_flag(a)]


def _asks_version(args: list[str]) -> bool:
    """Whether the group's own options (those before the command) are ``--version`` and global flags only."""
    group_options = []
    for arg in _options(args):
        if not arg.startswith("-"):
            break
        group_options.append(arg)
    return "--version" in group_options and all(a == "--version" or _is_global_flag(a) for a in group_options)


class _StderrHandler(logging.Handler):
    """Log lines as ``librarian: <message>`` on whatever ``sys.stderr`` is at the time of writing."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"librarian: {clean(record.getMessage(), ERROR_CHARS)}\n")
        except Exception:  # noqa: BLE001 - logging must never break a command
            self.handleError(record)


def _log_to_stderr() -> None:
    logger = logging.getLogger("librarian")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
        logger.propagate = False
    logger.setLevel(os.environ.get("LIBRARIAN_LOG", "WARNING").upper())


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; the one place errors become a line on stderr and an exit status."""
    args = _hoist_global_flags(sys.argv[1:] if argv is None else list(argv))
    if _asks_version(args):  # the answer needs no command group: typer is not even imported
        sys.stdout.write(f"librarian {__version__}\n")
        raise SystemExit(0)
    _log_to_stderr()
    # Imported here, not at the top: --version above is answered without typer (tests/test_startup.py).
    # Not a cycle: a start-up cost, paid only by the commands that need it.
    from librarian.cli.funnel import run

    try:
        run(args, as_json="--json" in _options(args))
    finally:
        progress.set_reporter(None)
