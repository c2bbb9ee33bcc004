"""What the CLI shows on a terminal: progress bars drawn by rich on stderr.

Used only by ``librarian.cli``; the work itself reports through :mod:`librarian.progress`.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.progress import Task as RichTask
from rich.table import Column
from rich.text import Text

from librarian.progress import BYTES, Task


class _Amount(ProgressColumn):
    """``12.3/600.0 MB 45 MB/s`` for bytes, ``3/30 wheels`` for items."""

    def __init__(self) -> None:
        super().__init__()
        self._size, self._speed, self._count = DownloadColumn(), TransferSpeedColumn(), MofNCompleteColumn()

    def render(self, task: RichTask) -> Text:
        """The amount done, in the task's unit."""
        unit = task.fields.get("unit", BYTES)
        if task.total is None and unit != BYTES:
            return Text("")  # a step of unknown length: the pulsing bar says it is under way
        if unit == BYTES:
            return Text.assemble(self._size.render(task), " ", self._speed.render(task))
        return Text.assemble(self._count.render(task), f" {unit}")


class _Bar:
    """One rich task, advanced by the work."""

    def __init__(self, progress: Progress, task_id: TaskID) -> None:
        self.progress = progress
        self.task_id = task_id

    def advance(self, amount: int = 1) -> None:
        """Move the bar on."""
        self.progress.advance(self.task_id, amount)


class RichReporter:
    """Bars on stderr (one per running task, nested ones below), each removed when its task ends."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(file=sys.stderr)
        # A long wheel name is cut, so that the bar, the amount and the time fit one 80-column line.
        name = TextColumn(
            "{task.description}", table_column=Column(max_width=40, no_wrap=True, overflow="ellipsis")
        )
        # stdout is left alone: what a command prints must reach a pipe, never the bar's stream.
        self.progress = Progress(
            name,
            BarColumn(bar_width=20),
            _Amount(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            redirect_stdout=False,
        )

    def start(self, description: str, total: int | None, unit: str) -> Task:
        """Show a bar for the task."""
        if not self.progress.live.is_started:
            self.progress.start()
        return _Bar(self.progress, self.progress.add_task(description, total=total, unit=unit))

    def stop(self, task: Task) -> None:
        """Remove the task's bar; the display ends with the last one."""
        assert isinstance(task, _Bar)
        self.progress.remove_task(task.task_id)
        if not self.progress.tasks:
            self.progress.stop()
