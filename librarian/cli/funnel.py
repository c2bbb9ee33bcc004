"""The one error funnel: every failure becomes one line on stderr (and JSON on stdout with ``--json``).

Exit status: 0 done, 1 a finding (verify found problems, pull found no match, doctor says no), 2 bad
usage or bad input (a missing store too), 3 the store could not be reached or refused us, 130
interrupted. A traceback only with ``LIBRARIAN_DEBUG=1``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import NoReturn

import typer

from librarian.cli import ui
from librarian.cli.app import app
from librarian.errors import LibrarianError
from librarian.redact import ERROR_CHARS, clean

log = logging.getLogger("librarian.cli")


def fail(
    message: str, code: int, details: list[str] | None = None, data: dict[str, object] | None = None
) -> NoReturn:
    """Print ``librarian: error: <message>`` (and its indented details) and exit with ``code``.

    ``data``: more fields for the ``--json`` document (pull's candidates and the demands each fails)."""
    # Every error line is made one short line without tokens (server text is untrusted).
    line = clean(message, ERROR_CHARS)
    cleaned = [clean(d, ERROR_CHARS).strip() for d in details or ()]
    if ui.state.json:  # scripts get the failure on stdout too, as the one JSON document they parse
        ui.emit_json({"schema": 1, "error": line, "exit": code, "details": cleaned, **(data or {})})
    ui.err(f"librarian: error: {line}")
    for detail in details or ():
        indent = detail[: len(detail) - len(detail.lstrip(" "))]
        ui.err(indent + clean(detail, ERROR_CHARS))
    raise SystemExit(code)


def _usage_error(e: typer.TyperException) -> NoReturn:
    """typer's (vendored click's) usage errors: no such option, a bad value, a missing argument."""
    ctx = getattr(e, "ctx", None)
    if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
        ui.out(ctx.get_help())
        raise SystemExit(2) from None
    message = e.format_message()
    name = getattr(ctx, "info_name", None)
    hint = (
        f" (see 'librarian {name} --help')" if name and name != "librarian" else " (see 'librarian --help')"
    )
    fail(" ".join(message.split()) + hint, e.exit_code)


def run(args: list[str], *, as_json: bool) -> NoReturn:
    """Run the command line ``args``; exit with its status, every failure through :func:`fail`."""
    ui.reset(as_json=as_json)
    if (hub := sys.modules.get("librarian.stores.hub_read")) is not None:
        hub.announced.clear()  # each command says the endpoint once (in-process runs: the tests, the API)
    debug = os.environ.get("LIBRARIAN_DEBUG") == "1"
    started = time.monotonic()
    try:
        result = app(args=args, prog_name="librarian", standalone_mode=False)
        log.debug("done in %.2f s", time.monotonic() - started)  # -vv: the timing
    except typer.Abort:
        fail("aborted", 130)
    except typer.TyperException as e:
        if debug:
            raise
        _usage_error(e)
    except LibrarianError as e:
        if debug:
            raise
        details = e.details() if hasattr(e, "details") else None
        fail(str(e), e.exit_code, details, e.data() if hasattr(e, "data") else None)
    except OSError as e:
        if debug:
            raise
        where = e.filename if e.filename else "librarian"
        fail(f"{where}: {e.strerror or e}", 2)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    if result == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into Exit(130), which it returns: say it
        fail("interrupted", 130)
    raise SystemExit(result if isinstance(result, int) else 0)
