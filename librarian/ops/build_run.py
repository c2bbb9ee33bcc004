"""Running a build's commands: logged to a file as they come, and stopped whole, children included."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

TAIL_LINES = 25  # the log's last lines a failure shows

Say = Callable[[str], None]


def run_logged(
    cmd: Sequence[str], env: Mapping[str, str], log_path: Path, on_line: Say
) -> tuple[int, list[str]]:
    """Run ``cmd``, its output appended to ``log_path`` as it comes; its exit status and last lines.

    The command runs in a process group of its own, and however this ends (Ctrl-C, an error) the whole
    group is stopped: pip's own children (a setup.py, the compilers under it) do not run on.
    """
    tail: list[str] = []
    with open(log_path, "a", encoding="utf-8", errors="replace") as out:
        out.write(f"+ {shlex.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            list(cmd),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=os.name != "nt",
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                tail.append(line.rstrip("\n"))
                del tail[:-TAIL_LINES]
                on_line(line.rstrip("\n"))
        finally:
            _stop_group(proc)
    return proc.returncode, tail


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """Stop ``proc`` and every process it started (its process group), and wait for it."""
    if os.name == "nt":  # no process groups to signal: the child alone
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
        return
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(proc.pid, signal.SIGTERM)  # after a normal exit too: nothing it started lives on
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextmanager
def build_folder(keep: bool) -> Iterator[Path]:
    """A fresh folder for one build, removed afterwards (whatever happened) unless ``keep``."""
    folder = Path(tempfile.mkdtemp(prefix="librarian-build-"))
    try:
        yield folder
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
