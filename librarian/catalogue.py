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

from librarian.coords import format_version
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
            # PEP 503: pip and uv skip a link whose data-requires-python excludes the interpreter.
            requires = f' data-requires-python="{html.escape(e.requires_python, quote=True)}"' if e.requires_python else ""
            links.append(f'<a href="{href}#sha256={e.sha256}"{requires}>{html.escape(e.filename)}</a><br>')
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


def render_card(index: Index, repo_id: str, endpoint: str = "https://huggingface.co") -> bytes:
    """The dataset card (``README.md``) of a Hub store: usage, the layout and the coverage table."""
    from librarian.ops.ls import coverage, render_coverage  # the table is ls's; import here to keep layers

    table = render_coverage(coverage(index, f"hf://datasets/{repo_id}"))
    example = index.entries[0] if index.entries else None
    pull = "librarian pull PACKAGE --sm 89 --torch 2.9"
    download = "hf_hub_download(REPO, PATH_FROM_THE_INDEX, repo_type=\"dataset\")"
    find_links = f"{endpoint}/datasets/{repo_id}/resolve/main/pages/sm89-torch2.9-cu128.html"
    if example is not None:
        cell = example.cell
        pull = f"librarian pull {cell.package} --sm {cell.sm.sm} --torch {format_version(cell.label.torch)} --cuda {format_version(cell.label.cuda)}"
        download = f'hf_hub_download("{repo_id}", "{example.path}", repo_type="dataset")'
        find_links = f"{endpoint}/datasets/{repo_id}/resolve/main/{page_path(example)}"
    text = f"""---
tags:
- wheels
- cuda
- pytorch
- librarian
---
# {repo_id}: prebuilt CUDA / PyTorch extension wheels

Wheels filed by [librarian](https://pypi.org/project/librarian-wheels/), one folder per GPU arch and
torch/CUDA combo, with the layout `{index.layout.path}`. The local version label (`+cu128torch2.9`)
carries the CUDA line and torch minor; the folder says which GPU the binaries serve.

## Use

```bash
pip install librarian-wheels
{pull} --repo hf://datasets/{repo_id} --install
```

```python
from huggingface_hub import hf_hub_download
path = {download}
```

Plain pip, one page per GPU and combo (install with `--no-deps --force-reinstall` to keep your torch):

```bash
pip install --no-deps --force-reinstall PACKAGE --find-links {find_links}
```

## Coverage

```
{table}
```

`index.json` and `index/<package>.json` list every wheel with its sha256, tags and what its binaries need.
This card is rewritten by every `librarian publish` and `librarian gc`.
"""
    return text.encode()
