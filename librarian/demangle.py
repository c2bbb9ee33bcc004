"""C++ symbols as a person reads them: each Itanium-mangled name in a text (``_ZN3c10...``) demangled by
binutils' ``c++filt`` where it is on PATH, and cut to a width with how much was cut.

One ``c++filt`` process reads every symbol of a text; it never sees more than :data:`MAX_SYMBOLS` names of
at most :data:`MAX_SYMBOL` characters, is stopped once it writes :data:`MAX_OUTPUT` bytes, and a crash, a
time-out, an answer too long or of the wrong shape leaves the mangled names as they were: a demangler fed a hostile wheel's symbols harms only its own process. Where
``c++filt`` is not at hand, the mangled name is shown, cut to the width. JSON keeps the mangled names whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from typing import IO

ITANIUM = re.compile(r"\b_Z[A-Za-z0-9_]+")  # gcc and clang: c++filt reads these
MSVC = re.compile(r"\?[A-Za-z0-9_?@$]+@@[A-Za-z0-9_?@$]*")  # a .pyd's imports: shown cut, not demangled
MAX_SYMBOL = 4096  # libtorch's longest exported names are under 1,000 characters
MAX_SYMBOLS = 64
MAX_OUTPUT = 256 << 10  # what c++filt may write for them: 64 names of 4 KB
TIMEOUT = 5.0  # 64 real names take milliseconds; a bomb is given up on (its names stay mangled)
MEMORY = 256 << 20  # c++filt's address space: a name that demangles to gigabytes ends it, not the machine
WIDTH = 60


def demangle(symbols: Iterable[str]) -> dict[str, str]:
    """Each symbol that ``c++filt`` demangles, to its C++ name; empty where ``c++filt`` is not at hand or fails."""
    wanted = list(dict.fromkeys(s for s in symbols if len(s) <= MAX_SYMBOL))[:MAX_SYMBOLS]
    tool = shutil.which("c++filt")
    if not wanted or tool is None:
        return {}
    out = _run_bounded([tool], ("\n".join(wanted) + "\n").encode())
    if out is None:
        return {}
    said = out.decode("utf-8", "replace").splitlines()
    if len(said) != len(wanted):
        return {}
    return {m: d for m, d in zip(wanted, said, strict=True) if d and d != m}


def _run_bounded(argv: list[str], data: bytes) -> bytes | None:
    """What ``argv`` writes for ``data``, or ``None`` where it fails, outlives :data:`TIMEOUT` or writes more
    than :data:`MAX_OUTPUT` bytes (a name whose demangled form doubles at each level of nesting): it is
    stopped there, and nothing it wrote is kept."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=_limit_memory if os.name == "posix" else None,  # noqa: PLW1509 - nothing else runs there
        )
    except OSError:
        return None
    assert proc.stdin is not None and proc.stdout is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True)
    feeder.start()
    deadline = time.monotonic() + TIMEOUT
    chunks, total = [], 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0 and total <= MAX_OUTPUT:
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    if total > MAX_OUTPUT or time.monotonic() >= deadline:
        proc.kill()
        proc.wait()
        return None
    return b"".join(chunks) if proc.wait() == 0 else None


def _limit_memory() -> None:
    """In the child: its address space bounded, so that a demangler bomb fails an allocation and ends."""
    import resource

    with contextlib.suppress(ValueError, OSError):  # a limit that cannot be set: the time-out still holds
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        with pipe:
            pipe.write(data)
    except OSError:
        pass  # it stopped reading (killed, or done): what it wrote decides


def shorten(text: str, width: int = WIDTH) -> str:
    """``text`` cut to ``width`` characters, saying how many were cut."""
    if len(text) <= width:
        return text
    cut = len(text) - (width - 1)
    return f"{text[: width - 1]}… ({cut} more characters)"


def brief(name: str, width: int = WIDTH) -> str:
    """A demangled function name within ``width``: its parameters folded to ``(…)`` first, then cut."""
    if len(name) > width and (open_at := _parameters_at(name)) is not None:
        name = name[:open_at] + "(…)"
    return shorten(name, width)


def _parameters_at(name: str) -> int | None:
    """Where the outermost parameter list of a demangled function name opens (past its template arguments)."""
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            return i
    return None


def readable(texts: Iterable[str], width: int = WIDTH) -> list[str]:
    """``texts`` with each mangled C++ symbol in them demangled where ``c++filt`` is at hand (parameters
    folded where long) and cut to ``width`` characters: one ``c++filt`` run for all of them."""
    texts = list(texts)
    names = demangle(m for t in texts for m in ITANIUM.findall(t))

    def one(m: re.Match[str]) -> str:
        symbol = m.group(0)
        return brief(names[symbol], width) if symbol in names else shorten(symbol, width)

    return [MSVC.sub(lambda m: shorten(m.group(0), width), ITANIUM.sub(one, t)) for t in texts]
