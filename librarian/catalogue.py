"""Everything a store generates from its index: the index files and the per-combo pip pages. Pure.

A pip page lists the wheels of one (sm, torch, CUDA) group only: pip picks the highest version, and a
page mixing combos would hand a cu130 wheel to a cu128 machine because ``+cu130`` sorts higher.
Links are relative, so the same page works in a local directory (``--find-links wheelhouse/pages/...``)
and on the Hub (``--find-links https://.../resolve/main/pages/...``).
"""

from __future__ import annotations

import html
import posixpath
from collections import defaultdict

from librarian.index import Index, IndexEntry, render_index

PAGES_DIR = "pages"


def page_path(entry: IndexEntry) -> str:
    """The pip page that lists ``entry``: ``pages/sm89-torch2.9-cu128.html``."""
    return f"{PAGES_DIR}/sm{entry.cell.sm.sm}-{entry.cell.label.combo}.html"


def render_pages(index: Index) -> dict[str, bytes]:
    """One find-links page per (sm, torch, CUDA) group, by store path."""
    groups: dict[str, list[IndexEntry]] = defaultdict(list)
    for entry in index.entries:
        groups[page_path(entry)].append(entry)
    pages: dict[str, bytes] = {}
    for path, entries in sorted(groups.items()):
        title = html.escape(posixpath.basename(path).removesuffix(".html"))
        links = []
        for e in sorted(entries, key=lambda e: e.path):
            href = html.escape(posixpath.relpath(e.path, PAGES_DIR), quote=True)
            links.append(f'<a href="{href}#sha256={e.sha256}">{html.escape(e.filename)}</a><br>')
        body = "\n".join(links)
        pages[path] = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n"
        ).encode()
    return pages


def render_catalogue(index: Index) -> dict[str, bytes]:
    """All generated files of a store for this index: index root and shards, pip pages."""
    return {**render_pages(index), **render_index(index)}


def is_generated(path: str) -> bool:
    """Whether a store path is one librarian generates (never a stored wheel)."""
    return path == "index.json" or path.startswith(("index/", f"{PAGES_DIR}/"))
