"""Progress of long work, told to whoever listens: nobody by default, a bar on a terminal (set by the CLI).

Like :mod:`logging`, this is a sink that the code doing the work reports to without knowing who shows it:
``with progress.task("retag x.whl", total=size) as t: t.advance(n)``. Nothing here prints; the CLI
installs a :class:`Reporter` (``librarian.terminal``) only when stderr is a terminal and neither ``-q``
nor ``--json`` was given, so tests, pipes and CI logs see nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Protocol

BYTES = "bytes"
WHEELS = "wheels"


class Task(Protocol):
    """One unit of work being reported: advanced as it goes."""

    def advance(self, amount: int = 1) -> None:
        """Record ``amount`` more done (bytes or items, in the task's unit)."""


class Reporter(Protocol):
    """Shows tasks to someone (a terminal bar), or not."""

    def start(self, description: str, total: int | None, unit: str) -> Task:
        """Begin showing a task; ``total`` is ``None`` when unknown."""

    def stop(self, task: Task) -> None:
        """Stop showing a task (done or failed)."""


class _Silent:
    def advance(self, amount: int = 1) -> None:
        """Nothing is shown."""

    def start(self, description: str, total: int | None, unit: str) -> Task:
        return self

    def stop(self, task: Task) -> None:
        """Nothing was shown."""


_SILENT = _Silent()
_reporter: Reporter = _SILENT


def set_reporter(reporter: Reporter | None) -> None:
    """Install the reporter every task goes to (``None``: silent again)."""
    global _reporter
    _reporter = reporter if reporter is not None else _SILENT


@contextlib.contextmanager
def task(description: str, total: int | None = None, unit: str = BYTES) -> Iterator[Task]:
    """Report one task for the ``with`` block's length."""
    current = _reporter
    handle = current.start(description, total, unit)
    try:
        yield handle
    finally:
        current.stop(handle)


@contextlib.contextmanager
def overall(description: str, total: int, unit: str = WHEELS) -> Iterator[Task]:
    """A bar over many items (``publish`` of 12 wheels); none for one, whose own bar shows its work (a
    "0/1 wheels" bar that sits still beside it says nothing)."""
    if total <= 1:
        yield _SILENT
        return
    with task(description, total, unit) as bar:
        yield bar


def counted(chunks: Iterable[bytes], task: Task) -> Iterator[bytes]:
    """``chunks`` passed through, ``task`` advanced by each one's length."""
    for chunk in chunks:
        task.advance(len(chunk))
        yield chunk
