"""Running a build's commands, bounded: whatever they do, they end when the build does.

- Output is read in chunks of at most :data:`CHUNK` bytes and split into lines of at most :data:`MAX_LINE`
  characters (a 1 GiB line with no newline costs no more memory than a short one).
- The log is capped (:data:`LOG_CAP`, ``LIBRARIAN_BUILD_LOG_MAX``): its head is written as it comes, its
  tail kept in a ring and written at the end, with a line saying how much was cut between them.
- Every line written to the log or shown passes through :func:`librarian.redact.mask`: a password in an
  index URL or a source URL never reaches the screen or the log.
- Each command runs in a process group of its own, under a tag in its environment; when it ends (or the
  build is stopped), the group and every process carrying the tag are stopped, those that started a
  session of their own included. On Linux librarian is their subreaper while it runs, so that orphans are
  its children, not init's, and are reaped.
- A command that has exited while something it started still holds the output pipe open is given
  :data:`GRACE` seconds (``LIBRARIAN_BUILD_GRACE``), then that something is stopped.
- SIGTERM is taken as Ctrl-C is: :class:`librarian.errors.Terminated`, exit 143, after the stop above.
- A heartbeat line at least every :data:`HEARTBEAT` seconds, so a log read off a terminal (CI) tells a slow
  compile from a hang.
"""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from librarian.ops.build.build_processes import TAG_VARIABLE, PipeHolders, children, stop_all
from librarian.redact import mask

TAIL_LINES = 25  # the log's last lines a failure shows (less pip's echo of the command it ran)
_KEPT_LINES = 400  # the last lines kept while reading, from which the tail is taken
CHUNK = 1 << 16  # bytes read from a command's output at a time
MAX_LINE = 4096  # characters of one line kept for the screen and the tail (the log gets LOG_CAP's worth)
LOG_CAP = 64 << 20  # bytes of log per build: half its head, half its tail
GRACE = 10.0  # seconds a process may hold the output open after the command it came from has exited
HEARTBEAT = 60.0  # seconds without a line shown before "still running" is said

Say = Callable[[str], None]


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= 0 else default


class BuildLog:
    """One build's log file, capped: the first half of the cap written as it comes, the last half kept in a
    ring and written by :meth:`close`, with the count of bytes cut between them."""

    def __init__(self, path: Path, cap: int | None = None) -> None:
        self.path = path
        self.cap = int(_env_number("LIBRARIAN_BUILD_LOG_MAX", LOG_CAP)) if cap is None else cap
        self._head = max(0, self.cap - self.cap // 2)
        self._tail_cap = self.cap // 2
        self._written = 0
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._cut = 0
        self._out = open(path, "ab")  # noqa: SIM115 (closed by close(), at the build's end)

    def write(self, text: str) -> None:
        """Append ``text`` (masked by the caller): to the file while the head lasts, then to the ring."""
        data = text.encode("utf-8", "replace")
        room = self._head - self._written
        if room > 0:
            self._out.write(data[:room])
            self._written += min(room, len(data))
            data = data[room:]
            if not data:
                self._out.flush()
                return
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail and self._tail_size - len(self._tail[0]) >= self._tail_cap:
            self._cut += len(self._tail[0])
            self._tail_size -= len(self._tail.popleft())

    def close(self) -> None:
        """Write the kept tail (after a line saying what was cut) and close the file."""
        if self._out.closed:
            return
        over = self._tail_size - self._tail_cap
        if over > 0 and self._tail:  # the ring keeps whole chunks: trim the oldest to the cap
            self._tail[0] = self._tail[0][over:]
            self._cut += over
        if self._cut:
            self._out.write(
                f"\n[librarian: {self._cut} bytes of output cut here; the log keeps its first "
                f"{self._head} and last {self._tail_cap} bytes (LIBRARIAN_BUILD_LOG_MAX={self.cap})]\n".encode()
            )
        for chunk in self._tail:
            self._out.write(chunk)
        self._tail.clear()
        self._out.close()


class _Lines:
    """Bytes in, whole lines out (each at most MAX_LINE characters; the rest of a longer line is dropped
    from the screen and the tail, not from the log)."""

    def __init__(self) -> None:
        self._partial = bytearray()
        self._dropped = False

    def feed(self, data: bytes) -> list[str]:
        lines: list[str] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end])
            lines.append(self._finish())
            start = end + 1
        self._take(data[start:])
        return lines

    def _take(self, piece: bytes) -> None:
        room = MAX_LINE - len(self._partial)
        if len(piece) > room:
            self._dropped = True
        self._partial += piece[: max(room, 0)]

    def _finish(self) -> str:
        line = self._partial.decode("utf-8", "replace").rstrip("\r")
        if self._dropped:
            line += " [...]"
        self._partial.clear()
        self._dropped = False
        return line

    def rest(self) -> list[str]:
        return [self._finish()] if self._partial or self._dropped else []


def run_logged(
    cmd: Sequence[str],
    env: Mapping[str, str],
    log: BuildLog,
    on_line: Say,
    *,
    heartbeat: Callable[[float], None] | None = None,
) -> tuple[int, list[str]]:
    """Run ``cmd``, its output appended to ``log`` as it comes (masked); its exit status and last lines.

    However this ends (the command's exit, an error, Ctrl-C, SIGTERM), nothing it started runs on."""
    tail: deque[str] = deque(maxlen=_KEPT_LINES)
    tag = f"{os.getpid()}-{uuid.uuid4().hex}"
    log.write(mask(f"+ {shlex.join(cmd)}\n"))
    before = children()
    proc = subprocess.Popen(
        list(cmd),
        env={**env, TAG_VARIABLE: tag},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=os.name != "nt",
    )
    assert proc.stdout is not None
    try:
        _pump(proc, log, tail, on_line, heartbeat, before)
    finally:
        proc.stdout.close()
        stop_all(proc, tag, before)
    return proc.returncode, failure_tail(list(tail))


def failure_tail(lines: list[str]) -> list[str]:
    """The last TAIL_LINES lines, less the command pip -v echoes after a failed step (``full command:``
    through ``cwd:``: dozens of lines of its setup.py shim that would push the build's own error out)."""
    kept: list[str] = []
    echo = False
    for line in lines:
        if line.lstrip().startswith("full command:"):
            echo = True
        elif echo and line.lstrip().startswith("cwd:"):
            echo = False
            continue
        if not echo:
            kept.append(line)
    return kept[-TAIL_LINES:]


def _pump(
    proc: subprocess.Popen[bytes],
    log: BuildLog,
    tail: deque[str],
    on_line: Say,
    heartbeat: Callable[[float], None] | None,
    before: set[int],
) -> None:
    """Read the output until its end, or until GRACE after the command's exit while others hold it; an
    orphan of the build that holds a pipe (some process's output) is stopped GRACE after it is seen."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    lines = _Lines()
    started = last = time.monotonic()
    every = _env_number("LIBRARIAN_BUILD_HEARTBEAT", HEARTBEAT)
    grace = _env_number("LIBRARIAN_BUILD_GRACE", GRACE)
    exited_at: float | None = None
    holders = PipeHolders(proc.pid, before, grace)
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > grace:
                log.write(
                    f"\n[librarian: the command exited; its output was still held open {grace:.0f} s later]\n"
                )
                break
            if sel.select(timeout=1.0):
                data = os.read(fd, CHUNK)
                if not data:
                    break
                log.write(mask(data.decode("utf-8", "replace")))
                for line in lines.feed(data):
                    shown = mask(line)
                    tail.append(shown)
                    on_line(shown)
                    last = time.monotonic()
            holders.check(log)
            if heartbeat is not None and every and time.monotonic() - last >= every:
                heartbeat(time.monotonic() - started)
                last = time.monotonic()
    for line in lines.rest():
        tail.append(mask(line))


# --- build folders ---------------------------------------------------------------------------------

_FOLDER_PREFIX = "librarian-build-"
_KEPT = ".librarian-kept"


@contextmanager
def build_folder(keep: bool) -> Iterator[Path]:
    """A fresh folder for one build, removed afterwards (whatever happened) unless ``keep``; folders that
    killed builds left behind (their process gone) are swept first."""
    sweep_folders(Path(tempfile.gettempdir()))
    folder = Path(tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-"))
    if keep:
        (folder / _KEPT).touch()  # asked for: never swept
    try:
        yield folder
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def sweep_folders(where: Path) -> list[Path]:
    """Remove the build folders in ``where`` whose builds' processes are gone (SIGKILL, a lost machine)."""
    swept = []
    for folder in where.glob(f"{_FOLDER_PREFIX}*"):
        pid_text = folder.name.removeprefix(_FOLDER_PREFIX).split("-", 1)[0]
        if (
            not pid_text.isdigit()
            or not folder.is_dir()
            or (folder / _KEPT).exists()
            or _alive(int(pid_text))
        ):
            continue  # a folder of the old naming, or of a build still running
        shutil.rmtree(folder, ignore_errors=True)
        swept.append(folder)
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
