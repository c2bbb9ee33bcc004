"""``librarian matrix refresh``: read PyTorch's wheel index and record what it serves.

The served part is written to the user's override file (see :func:`librarian.pytorch.matrix.override_path`),
never into the installed package, by writing a temp file beside it and renaming it over.
"""

from __future__ import annotations

import datetime as dt
import logging
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from librarian.coords import MajorMinor, format_cuda
from librarian.errors import BadInput, StoreError, Unreachable
from librarian.pytorch.index_pages import PEP691_JSON, IndexScan, scan_page
from librarian.pytorch.matrix import (
    Combo,
    CPython,
    Matrix,
    MatrixDoc,
    Platform,
    ServedRow,
    dump_matrix,
    merge_matrix,
    override_path,
    packaged_matrix,
    read_override,
)
from librarian.safeio import atomic_write, read_regular

log = logging.getLogger(__name__)

DEFAULT_INDEX = "https://download.pytorch.org/whl"


@dataclass(frozen=True, slots=True)
class RefreshResult:
    """What a refresh read and changed: combos added to and removed from the effective matrix."""

    path: Path
    sources: tuple[str, ...]
    added: tuple[Combo, ...]
    removed: tuple[Combo, ...]
    served: int  # served combos read from the pages
    skipped: int  # wheels on the pages that are not final torch CUDA wheels


def default_sources(matrix: Matrix) -> tuple[str, ...]:
    """One ``.../whl/cuXYZ/torch/`` page per CUDA line the matrix knows."""
    lines = sorted({c.cuda for c in matrix.all_combos})
    return tuple(f"{DEFAULT_INDEX}/cu{format_cuda(line)}/torch/" for line in lines)


MAX_PAGE_BYTES = 64 << 20  # PyTorch's biggest page (cu128's torch/) is a few MB


def read_source(source: str, timeout: float = 30.0) -> tuple[str, str | None]:
    """The text of an index page (URL or file) and its content type, if known."""
    if urlsplit(source).scheme in ("http", "https", "file"):
        # Ask for PEP 691 JSON first; PEP 503 HTML is what older mirrors answer with.
        request = urllib.request.Request(source, headers={"Accept": f"{PEP691_JSON}, text/html;q=0.1"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body: bytes = response.read(MAX_PAGE_BYTES + 1)
                if len(body) > MAX_PAGE_BYTES:
                    raise StoreError(f"{source}: over {MAX_PAGE_BYTES} bytes, more than an index page")
                charset = response.headers.get_content_charset() or "utf-8"
                ctype: str | None = response.headers.get_content_type()
        except urllib.error.HTTPError as e:
            # A 4xx names a page that is not there (exit 2); a 5xx or 429 is the server refusing us (exit 3).
            error = Unreachable if e.code >= 500 or e.code == 429 else StoreError
            raise error(f"{source}: HTTP {e.code} {e.reason}") from e
        except (urllib.error.URLError, OSError) as e:  # DNS, refused, reset, timed out: the network (exit 3)
            reason = getattr(e, "reason", e)
            raise Unreachable(f"{source}: cannot be reached ({reason})") from e
        return body.decode(charset, errors="replace"), ctype
    try:
        # a FIFO or device refused by what it is, a file past the bound by its size
        text = read_regular(Path(source), MAX_PAGE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise StoreError(f"{source}: cannot be read ({reason})") from e
    return text, "application/json" if source.endswith(".json") else None


def served_rows(scans: Iterable[tuple[str, IndexScan]], date: dt.date) -> tuple[ServedRow, ...]:
    """One served row per (torch, CUDA, platform) found, naming the page(s) it was read from."""
    found: dict[tuple[MajorMinor, MajorMinor, int], tuple[Platform, set[CPython], list[str]]] = {}
    order = list(Platform)
    for source, scan in scans:
        for c in scan.combos:
            key = (c.torch, c.cuda, order.index(c.platform))
            _, pys, sources = found.setdefault(key, (c.platform, set(), []))
            pys.add(c.python)
            if source not in sources:
                sources.append(source)
    return tuple(
        ServedRow(key[0], key[1], plat, tuple(sorted(pys, key=lambda p: p.key)), " ".join(sources), date)
        for key, (plat, pys, sources) in sorted(found.items())
    )


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by a temp file in the same folder renamed over it."""
    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as e:
        raise StoreError(f"{path}: cannot write the matrix override ({e})") from e


def _diff(before: Matrix, after: Matrix) -> tuple[tuple[Combo, ...], tuple[Combo, ...]]:
    old = {c.key: c for c in before.all_combos}
    new = {c.key: c for c in after.all_combos}
    return tuple(c for k, c in new.items() if k not in old), tuple(c for k, c in old.items() if k not in new)


def refresh(
    source: str | None = None,
    *,
    override: Path | None = None,
    timeout: float = 30.0,
    today: dt.date | None = None,
) -> RefreshResult:
    """Read ``source`` (a URL or file; default: every CUDA line's page on download.pytorch.org) and
    rewrite the served part of the override file for the CUDA lines found there."""
    path = override if override is not None else override_path()
    base = packaged_matrix()
    user = read_override(path) or MatrixDoc()
    before = Matrix(merge_matrix(base, user))
    sources = (source,) if source is not None else default_sources(before)
    scans: list[tuple[str, IndexScan]] = []
    for s in sources:
        try:
            text, ctype = read_source(s, timeout)
        except StoreError as e:
            # With the default pages, one CUDA line PyTorch has since dropped must not stop the rest.
            if source is not None or "HTTP 404" not in str(e):
                raise
            log.info("%s", e)
            continue
        scans.append((s, scan_page(text, ctype, s)))
    rows = served_rows(scans, today or dt.date.today())
    if not rows:
        raise BadInput(
            f"{', '.join(sources)}: no torch CUDA wheels listed (expected a page like "
            f"{DEFAULT_INDEX}/cu128/torch/)"
        )
    # Only the CUDA lines read this time are replaced: a page for cu128 says nothing about cu126.
    covered = {r.cuda for r in rows}
    kept = tuple(r for r in user.served if r.cuda not in covered)
    order = list(Platform)
    new_user = replace(
        user, served=tuple(sorted(kept + rows, key=lambda r: (r.torch, r.cuda, order.index(r.platform))))
    )
    after = Matrix(merge_matrix(base, new_user))
    write_atomic(path, dump_matrix(new_user))
    added, removed = _diff(before, after)
    return RefreshResult(
        path,
        tuple(s for s, _ in scans),
        added,
        removed,
        sum(len(scan.combos) for _, scan in scans),
        sum(len(scan.skipped) for _, scan in scans),
    )
