"""C++ symbols as a person reads them: each Itanium-mangled name in a text (``_ZN3c10...``) demangled by
binutils' ``c++filt`` where it is on PATH, and cut to a width with how much was cut.

One ``c++filt`` process reads every symbol of a text; it never sees more than :data:`MAX_SYMBOLS` names of
at most :data:`MAX_SYMBOL` characters, and a crash, a time-out or an answer of the wrong shape leaves the
mangled names as they were: a demangler fed a hostile wheel's symbols harms only its own process. Where
``c++filt`` is not at hand, the mangled name is shown, cut to the width. JSON keeps the mangled names whole.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable

ITANIUM = re.compile(r"\b_Z[A-Za-z0-9_]+")  # gcc and clang: c++filt reads these
MSVC = re.compile(r"\?[A-Za-z0-9_?@$]+@@[A-Za-z0-9_?@$]*")  # a .pyd's imports: shown cut, not demangled
MAX_SYMBOL = 4096  # libtorch's longest exported names are under 1,000 characters
MAX_SYMBOLS = 64
TIMEOUT = 10.0
WIDTH = 60


def demangle(symbols: Iterable[str]) -> dict[str, str]:
    """Each symbol that ``c++filt`` demangles, to its C++ name; empty where ``c++filt`` is not at hand or fails."""
    wanted = list(dict.fromkeys(s for s in symbols if len(s) <= MAX_SYMBOL))[:MAX_SYMBOLS]
    tool = shutil.which("c++filt")
    if not wanted or tool is None:
        return {}
    try:
        done = subprocess.run(
            [tool],
            input="\n".join(wanted) + "\n",
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, UnicodeError):
        return {}
    said = done.stdout.splitlines()
    if done.returncode != 0 or len(said) != len(wanted):
        return {}
    return {m: d for m, d in zip(wanted, said, strict=True) if d and d != m}


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
