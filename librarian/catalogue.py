"""Everything a store generates from its index: the index files and the per-combo pip pages (the dataset
card is :mod:`librarian.card`). Pure.

A pip page lists the wheels that serve one (sm, torch, CUDA) group only: pip picks the highest version, and
a page mixing combos would hand a cu130 wheel to a cu128 machine because ``+cu130`` sorts higher. A wheel
filed for another combo is listed where the judgement says its bytes serve this one (within a version, the
label of the very combo sorts highest, so pip takes the wheel built for it).
Links are relative, so the same page works in a local directory (``--find-links wheelhouse/pages/...``)
and on the Hub (``--find-links https://.../resolve/main/pages/...``).
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from typing import TYPE_CHECKING

from librarian.coords import Label, MajorMinor
from librarian.index import Index, IndexEntry, shard_path
from librarian.index_files import ROOT, render_index

if TYPE_CHECKING:
    from librarian.demands import Wheel
from librarian.variant_format import VARIANTS_DIR
from librarian.variants import render_variants

PAGES_DIR = "pages"


def page_path(entry: IndexEntry) -> str:
    """The pip page that lists ``entry``: ``pages/sm89-torch2.9-cu128.html``."""
    return f"{PAGES_DIR}/sm{entry.cell.sm.sm}-{entry.cell.label.combo}.html"


def page_entries(index: Index) -> dict[str, list[IndexEntry]]:
    """Each page's wheels: those filed for its (sm, torch, CUDA) combo, and those of the same GPU filed for
    another combo whose bytes serve it too (no torch linked, torch's stable ABI, an older CUDA minor, a
    build per CUDA line), as pull would take them. Pages exist only for the combos the store files."""
    # The judgement, loaded here: a command that reads an index without rendering pages (ls, pull) never loads it.
    from librarian.demands import bound_to_its_torch_line, serves_line

    groups: dict[str, list[IndexEntry]] = defaultdict(list)
    combos: dict[str, set[tuple[MajorMinor, MajorMinor]]] = defaultdict(set)
    for entry in index.entries:
        groups[page_path(entry)].append(entry)
        combos[entry.cell.sm.sm].add((entry.cell.label.torch, entry.cell.label.cuda))
    # Within a version, the wheel built for the very combo is the one pip must take: no other is listed beside it.
    releases = {e.path: _release(e) for e in index.entries}
    native = {path: {releases[e.path] for e in entries} for path, entries in groups.items()}
    asked: dict[tuple[str, MajorMinor, MajorMinor], bool] = {}  # the same bytes in many cells: judged once
    exact: dict[str, bool] = {}
    for entry in index.entries:
        own = (entry.cell.label.torch, entry.cell.label.cuda)
        others = sorted(combos[entry.cell.sm.sm] - {own})
        if not others:
            continue
        wheel: Wheel | None = None  # made only where a judgement is needed: most pages have the very build
        release = releases[entry.path]
        for torch_line, cuda_line in others:
            page = f"{PAGES_DIR}/sm{entry.cell.sm.sm}-{Label(cuda_line, torch_line).combo}.html"
            if release in native[page]:
                continue  # the build for that very combo is there
            wheel = wheel or wheel_of(entry)
            if torch_line != own[0]:
                if entry.sha256 not in exact:
                    exact[entry.sha256] = bound_to_its_torch_line(wheel)
                if exact[entry.sha256]:
                    continue
            key = (entry.sha256, torch_line, cuda_line)
            if key not in asked:
                asked[key] = serves_line(wheel, torch_line, cuda_line) is not None
            if asked[key]:
                groups[page].append(entry)
    return groups


def _release(entry: IndexEntry) -> tuple[str, str, str]:
    """(package, version without its label, tags), read off the filename without parsing it: what makes two
    builds one release (100,000 filenames parsed would double a big store's render)."""
    parts = entry.filename.removesuffix(".whl").split("-")
    return entry.cell.package, parts[1].split("+", 1)[0], "-".join(parts[-3:])


def _html(title: str, links: list[str]) -> bytes:
    body = "\n".join(links)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
        f"<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n"
    ).encode()


def _link(e: IndexEntry, here: str) -> str:
    """One wheel's anchor, its href relative to the folder ``here``."""
    href = _escape(posixpath.relpath(e.path, here), quote=True)
    # PEP 503: pip and uv skip a link whose data-requires-python excludes the interpreter.
    requires = (
        f' data-requires-python="{_escape(e.requires_python, quote=True)}"' if e.requires_python else ""
    )
    if e.metadata_sha256:  # PEP 658 (and PEP 714's newer name): resolvers read METADATA, not the wheel
        requires += f' data-dist-info-metadata="sha256={e.metadata_sha256}" data-core-metadata="sha256={e.metadata_sha256}"'
    return f'<a href="{href}#sha256={e.sha256}"{requires}>{_escape(e.filename)}</a><br>'


def simple_root(page: str) -> str:
    """The PEP 503 index beside a find-links page: ``pages/sm89-torch2.9-cu128/simple``."""
    return f"{page.removesuffix('.html')}/simple"


def project_name(package: str) -> str:
    """PEP 503's normalized project name, the folder pip asks for: ``flash_attn`` -> ``flash-attn``."""
    return re.sub(r"[-_.]+", "-", package).lower()


def _simple_projects(index: Index) -> dict[str, set[str]]:
    """Each page's PEP 503 projects: every package filed for that GPU (what the page lists of one of them
    may be nothing, and pip then finds no version, as without the folder). Cheap: no judgement."""
    by_sm: dict[str, set[str]] = defaultdict(set)
    pages: set[str] = set()
    for e in index.entries:
        by_sm[e.cell.sm.sm].add(e.cell.package)
        pages.add(page_path(e))
    return {p: by_sm[p.removeprefix(f"{PAGES_DIR}/sm").split("-", 1)[0]] for p in pages}


def render_pages(index: Index) -> dict[str, bytes]:
    """One find-links page per (sm, torch, CUDA) group, by store path; beside each, the same wheels as a PEP 503
    ``simple/`` index (``pip install --index-url .../pages/sm89-torch2.9-cu128/simple/``)."""
    groups = page_entries(index)
    projects = _simple_projects(index)
    pages: dict[str, bytes] = {}
    for path, entries in sorted(groups.items()):
        title = _escape(posixpath.basename(path).removesuffix(".html"))
        ordered = sorted(entries, key=lambda e: e.path)
        pages[path] = _html(title, [_link(e, PAGES_DIR) for e in ordered])
        root = simple_root(path)
        names = sorted(project_name(p) for p in projects.get(path, ()))
        pages[f"{root}/index.html"] = _html(
            f"{title} (simple)", [f'<a href="{n}/">{n}</a><br>' for n in names]
        )
        for package in projects.get(path, ()):
            folder = f"{root}/{project_name(package)}"
            mine = [e for e in ordered if e.cell.package == package]
            pages[f"{folder}/index.html"] = _html(
                _escape(project_name(package)), [_link(e, folder) for e in mine]
            )
    return pages


def render_catalogue(index: Index) -> dict[str, bytes]:
    """All generated files of a store for this index: index root and shards, pip pages, and the wheel
    variants' ``variants.json`` files and find-links pages (where the store makes variants)."""
    return {**render_pages(index), **render_variants(index.entries), **render_index(index)}


def catalogue_paths(index: Index) -> frozenset[str]:
    """The generated files' paths for this index (what :func:`render_catalogue` writes), without rendering them."""
    simple = {f"{simple_root(page)}/index.html" for page in (page_path(e) for e in index.entries)}
    simple |= {
        f"{simple_root(page)}/{project_name(p)}/index.html"
        for page, ps in _simple_projects(index).items()
        for p in ps
    }
    variants = set(render_variants(index.entries)) if any(e.variant for e in index.entries) else set()
    return frozenset(
        {page_path(e) for e in index.entries}
        | {shard_path(p) for p in index.packages()}
        | {ROOT}
        | simple
        | variants
    )


def wheel_of(entry: IndexEntry) -> Wheel:
    """What the demands read of a stored wheel: its name, facts, Requires-Python, cell (its path's claim,
    where the filename carries no label) and torch requirement."""
    from librarian.demands import Wheel

    return Wheel(
        entry.name,
        entry.facts,
        entry.requires_python_spec,
        entry.cell.sm,
        requires_torch=entry.requires_torch_spec,
        filed_as=entry.cell.label,
    )


def is_generated(path: str) -> bool:
    """Whether a store path is one librarian generates (never a stored wheel)."""
    return path == "index.json" or path.startswith(("index/", f"{PAGES_DIR}/", f"{VARIANTS_DIR}/"))


def _escape(text: str, quote: bool = True) -> str:
    """``html.escape``, imported on first use: reading the index (pull, ls) renders no page."""
    import html

    return html.escape(text, quote)
