"""The errors librarian raises: one base class, standard bases mixed in.

Every message is one line, ``<file or value>: <problem>``; the CLI prints it as
``librarian: error: <message>`` and exits 2 (bad usage or input, a missing store), 1 (a finding) or 3 (the
store could not be reached or refused us).
"""

from __future__ import annotations


class LibrarianError(Exception):
    """Base of every error librarian raises on purpose."""

    exit_code = 2


class BadInput(LibrarianError, ValueError):
    """A value or file given to librarian is malformed (a wheel, a label, a layout, a flag)."""


class BadWheel(BadInput):
    """A wheel file is corrupt, unsafe or lies about its contents."""


class BadBinary(BadInput):
    """An ELF / PE / fatbinary member cannot be read (truncated, lying offsets, loops)."""


class LayoutError(BadInput):
    """A layout file is invalid, or a cell cannot be turned into a safe path."""


class StoreError(LibrarianError, OSError):
    """A store cannot be read or written (missing, conflicting, unreachable)."""


class NotFound(LibrarianError, LookupError):
    """A finding: nothing matches (pull found no wheel, verify found mismatches)."""

    exit_code = 1


class Refused(LibrarianError):
    """librarian will not do this without an explicit override (``--force``, ``--replace``); ``flags``: the
    overrides that would accept it, where it names some."""

    def __init__(self, message: str, flags: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.flags = flags


class Unreachable(StoreError):
    """The store could not be reached, or refused us (network, time-out, 5xx after retries, auth): exit 3."""

    exit_code = 3


class Terminated(LibrarianError):
    """SIGTERM (``timeout``, a CI cancel, ``docker stop``) arrived while librarian had work running: exit 143,
    as a shell reports a process the signal ended, once what was started is stopped."""

    exit_code = 143
