"""The stable C shim as a released torch declares it: every ``AOTI_TORCH_EXPORT`` function in the headers
its wheel ships (``torch/include/torch/csrc/stable/c/shim.h``, ``inductor/aoti_torch/c/*.h``,
``inductor/aoti_torch/generated/c_shim_*.h``) and the ``TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_Z``
guard around it, if any. Pure: text in, names and lines out.

:func:`floors_of_releases` folds the releases together: a function's line is the newest of its guard (in
any release) and the first release whose headers declare it (a header may mark a function earlier than the
release that first shipped it: the later one counts).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from librarian.coords import MajorMinor

_GUARD = re.compile(r"TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d{1,2})_(\d{1,3})_\d{1,3}")
_EXPORT = "AOTI_TORCH_EXPORT"
_NAME_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*\($")
_COMMENT = re.compile(r"//.*$")
HEADER_PREFIXES = (
    "torch/include/torch/csrc/stable/c/",
    "torch/include/torch/csrc/inductor/aoti_torch/c/",
    "torch/include/torch/csrc/inductor/aoti_torch/generated/",
)


def is_shim_header(member: str) -> bool:
    """Whether a wheel's member is one of the headers that declare shim functions."""
    return member.startswith(HEADER_PREFIXES) and member.endswith(".h")


def declared(text: str) -> dict[str, MajorMinor | None]:
    """Each exported function of one header and the newest feature guard around it (``None``: none)."""
    stack: list[MajorMinor | None] = []  # one entry per open #if: its guard, or None
    found: dict[str, MajorMinor | None] = {}
    pending: str | None = None  # the text of a declaration whose name is not yet seen
    in_block_comment = False
    for raw in text.splitlines():
        line = raw.strip()
        if in_block_comment:
            if "*/" in line:
                in_block_comment, line = False, line.split("*/", 1)[1].strip()
            else:
                continue
        if line.startswith("/*") and "*/" not in line:
            in_block_comment = True
            continue
        if line.startswith("#"):
            _directive(line[1:].strip(), stack)
            continue
        line = _COMMENT.sub("", line).strip()
        if pending is None and _EXPORT not in line:
            continue
        pending = (pending + " " if pending else "") + (
            line.split(_EXPORT, 1)[1] if pending is None else line
        )
        head = pending.split("(", 1)[0] + "(" if "(" in pending else None
        if head is None:
            if pending.rstrip().endswith(";"):  # an exported variable, not a function
                pending = None
            continue
        m = _NAME_BEFORE_PAREN.search(head)
        if m is not None:
            guards = [g for g in stack if g is not None]
            found[m[1]] = max(guards) if guards else None
        pending = None
    return found


def _directive(body: str, stack: list[MajorMinor | None]) -> None:
    word = body.split(None, 1)[0] if body else ""
    if word in ("if", "ifdef", "ifndef"):
        m = _GUARD.search(body) if word == "if" else None
        stack.append((int(m[1]), int(m[2])) if m else None)
    elif word in ("else", "elif") and stack:
        stack[-1] = None  # the other branch: not the guarded one
    elif word == "endif" and stack:
        stack.pop()


def release_declarations(headers: Iterable[str]) -> dict[str, MajorMinor | None]:
    """One release's functions from all its shim headers (a function declared twice: its newest guard)."""
    out: dict[str, MajorMinor | None] = {}
    for text in headers:
        for name, guard in declared(text).items():
            old = out.get(name)
            out[name] = guard if old is None else (max(old, guard) if guard is not None else old)
    return out


def floors_of_releases(
    releases: Mapping[MajorMinor, Mapping[str, MajorMinor | None]],
) -> dict[str, MajorMinor]:
    """Each function's torch line over the releases read (their line -> their declarations): the newest of
    its guards and the first release that declares it. The oldest release read is the base: a function it
    declares unguarded has that line."""
    since: dict[str, MajorMinor] = {}
    for line in sorted(releases):
        for name, guard in releases[line].items():
            first = since.get(name, line)
            since[name] = max(first, guard) if guard is not None else first
    return since
