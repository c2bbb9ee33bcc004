"""Stopping what a build started, all of it: its process group, every process carrying its tag (those that
started a session of their own too), the orphans librarian adopts as their subreaper (Linux), and, while it
runs, an orphan that holds a pipe open past a grace period. SIGTERM is raised as :class:`Terminated` while a
build runs, so that its ``finally`` blocks stop and sweep.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

from librarian.errors import Terminated

TAG_VARIABLE = "LIBRARIAN_BUILD_TAG"  # in every build command's environment: how its descendants are found
_PR_SET_CHILD_SUBREAPER = 36


class Log(Protocol):
    def write(self, text: str) -> None: ...


class PipeHolders:
    """Orphans of a build (adopted by librarian, its subreaper) whose output is a pipe: a daemon that did not
    let go of its parent's output keeps pip (which reads its backend's output to the end) waiting for good.
    Each is stopped ``grace`` seconds after it is first seen; a daemon writing elsewhere runs until the end."""

    def __init__(self, command: int, before: set[int], grace: float) -> None:
        self.command, self.before, self.grace = command, before, grace
        self.seen: dict[int, float] = {}
        self.next_look = 0.0

    def check(self, log: Log) -> None:
        now = time.monotonic()
        if now < self.next_look or not sys.platform.startswith("linux"):
            return
        self.next_look = now + 1.0
        for pid in children() - self.before - {self.command}:
            if not _holds_pipe(pid):
                continue
            first = self.seen.setdefault(pid, now)
            if now - first > self.grace:
                log.write(
                    f"\n[librarian: stopped process {pid}: it outlived its parent holding a pipe open]\n"
                )
                _kill({pid}, signal.SIGKILL)
                _reap({pid})


def _holds_pipe(pid: int) -> bool:
    """Whether ``pid``'s standard output or error is a pipe (Linux's /proc)."""
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                return True
    return False


def children() -> set[int]:
    """This process's children now (Linux's /proc; elsewhere none are known)."""
    me = str(os.getpid())
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat") if sys.platform.startswith("linux") else ():
        with contextlib.suppress(OSError, IndexError):
            # "pid (comm) state ppid ...": the command name may hold spaces and parentheses
            if stat.read_text().rpartition(")")[2].split()[1] == me:
                found.add(int(stat.parent.name))
    return found


def _tagged(tag: str) -> set[int]:
    """The processes whose environment carries ``tag`` (Linux's /proc; elsewhere none are known)."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found: set[int] = set()
    for environ in Path("/proc").glob("[0-9]*/environ") if sys.platform.startswith("linux") else ():
        with contextlib.suppress(OSError, ValueError):
            if needle in environ.read_bytes().split(b"\0"):
                found.add(int(environ.parent.name))
    return found


def _kill(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap(pids: set[int]) -> None:
    """Collect the exit status of those that are our children now (adopted orphans): no zombies left."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def stop_all(proc: subprocess.Popen[bytes], tag: str, before: set[int]) -> None:
    """Stop ``proc``, its process group and every process carrying ``tag`` or adopted since ``before``."""
    if os.name == "nt":  # no process groups or /proc: the child alone
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)  # after a normal exit too: nothing it started lives on
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + 5
        while (left := _tagged(tag) | (children() - before)) and time.monotonic() < deadline:
            _kill(left, sig)
            time.sleep(0.05)
            _reap(left)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _reap(children() - before)  # adopted orphans that ended: no zombie left behind


@contextmanager
def bounded() -> Iterator[None]:
    """While a build runs: librarian is the subreaper of what it starts (Linux), and SIGTERM raises
    :class:`Terminated` (in the main thread), so that the build's ``finally`` blocks stop and sweep."""
    previous: object = None
    main = threading.current_thread() is threading.main_thread()
    if main:

        def terminated(signum: int, frame: FrameType | None) -> None:
            raise Terminated("terminated (SIGTERM): the build was stopped, nothing was filed")

        previous = signal.signal(signal.SIGTERM, terminated)
    reaper = _subreaper(True)
    try:
        yield
    finally:
        if reaper:
            _subreaper(False)
        if main:
            signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]


def _subreaper(on: bool) -> bool:
    """Make this process the subreaper of its descendants (Linux's prctl); whether that took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
