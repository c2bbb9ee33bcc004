"""The files of an installed distribution's ``*.dist-info``, read as every other reader reads: each opened as
a regular file (a FIFO, a device, a socket named and skipped, never opened for reading), each with a size
cap, a line from ``top_level.txt`` taken as a name (never as a pattern). Nothing is imported or run.

Each reader returns what it read and, where the file is there but could not be read, one line saying why
(``WHEEL: a FIFO, not a regular file; skipped``), which ``doctor --env`` prints under the distribution.
"""

from __future__ import annotations

import errno
from pathlib import Path

from librarian.safeio import open_regular, read_regular
from librarian.wheel import torch_requirement

MAX_RECORD = 64 << 20  # bytes of RECORD read per distribution (torch's is ~2 MB)
MAX_SMALL = 1 << 20  # WHEEL, top_level.txt: a few lines each
MAX_HEADERS = 1 << 20  # METADATA: its headers, before the description
MAX_TOPS = 1000  # top-level names taken from top_level.txt
DEFAULT_TAG = "py3-none-any"


def read_text(info: Path, file: str, limit: int) -> tuple[str | None, str | None]:
    """``info/file`` as text: ``(text, None)``; ``(None, None)`` where there is no such file; ``(None, why)``
    where it is there but is no regular file, is over ``limit`` bytes or cannot be read."""
    try:
        data = read_regular(info / file, limit)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        reason = e.strerror or str(e)
        if e.errno == errno.EFBIG:
            reason = f"{reason}; not read"
        elif not reason.endswith("skipped"):
            reason = f"{reason}; skipped"
        return None, f"{file}: {reason}"
    return data.decode("utf-8", "replace"), None


def wheel_tag(info: Path) -> tuple[str, str | None]:
    """The first ``Tag:`` of its WHEEL (else ``py3-none-any``), and why WHEEL could not be read, if so."""
    text, problem = read_text(info, "WHEEL", MAX_SMALL)
    for line in (text or "").splitlines()[:50]:
        if line.startswith("Tag:"):
            return line.partition(":")[2].strip(), problem
    return DEFAULT_TAG, problem


def requires_torch(info: Path) -> tuple[str | None, str | None]:
    """Its METADATA's Requires-Dist on torch (the headers only: the first ``MAX_HEADERS`` bytes), and why
    METADATA could not be read, if so."""
    from email.parser import BytesHeaderParser

    try:
        with open_regular(info / "METADATA") as f:
            head = f.read(MAX_HEADERS).split(b"\n\n", 1)[0]
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"METADATA: {e.strerror or e}; skipped"
    headers = BytesHeaderParser().parsebytes(head)
    return torch_requirement([str(v) for v in headers.get_all("Requires-Dist") or ()]), None


def declared_tops(info: Path, name: str) -> tuple[list[str], str, str | None]:
    """The top-level names a distribution installed, where they were learnt (its ``top_level.txt``, else its
    own name as a package folder: ``my-pkg`` -> ``my_pkg``), and why ``top_level.txt`` could not be read.

    A line is a name only where it is a Python identifier (``**``, ``../x``, ``a/b`` are not)."""
    text, problem = read_text(info, "top_level.txt", MAX_SMALL)
    tops = [t for t in dict.fromkeys(line.strip() for line in (text or "").splitlines()) if t.isidentifier()]
    if tops:
        return tops[:MAX_TOPS], "top_level.txt", problem
    own = (name, name.replace("-", "_"), name.lower().replace("-", "_"))
    return [n for n in dict.fromkeys(own) if n.isidentifier()], "its package folder", problem
