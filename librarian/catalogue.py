"""Everything a store generates from its index: the index files and the per-combo pip pages. Pure.

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
from urllib.parse import quote

from librarian.coords import Label, MajorMinor, format_version
from librarian.coverage import coverage, render_coverage
from librarian.index import Index, IndexEntry, shard_path
from librarian.index_files import ROOT, render_index

if TYPE_CHECKING:
    from librarian.demands import Wheel
from librarian.variant_format import VARIANTS_DIR
from librarian.variants import page_path as variants_page_path
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
    """What the demands read of a stored wheel: its name, facts, Requires-Python, cell and torch requirement."""
    from librarian.demands import Wheel

    return Wheel(
        entry.name,
        entry.facts,
        entry.requires_python_spec,
        entry.cell.sm,
        requires_torch=entry.requires_torch_spec,
    )


def is_generated(path: str) -> bool:
    """Whether a store path is one librarian generates (never a stored wheel)."""
    return path == "index.json" or path.startswith(("index/", f"{PAGES_DIR}/", f"{VARIANTS_DIR}/"))


CARD = "README.md"
BEGIN = "<!-- librarian:begin -->"
END = "<!-- librarian:end -->"
CARD_TAGS = ("wheels", "cuda", "pytorch", "librarian")
_OLD_CARD_SIGN = "This card is rewritten by every `librarian publish` and `librarian gc`."


# The GPUs most readers of a card have, first: an example for a Jetson Nano (sm50, the lowest number) is
# one almost nobody can run as written. RTX 30/40 and L4, A100, H100, then the newest and the rest.
_COMMON_GPUS = (89, 86, 80, 90, 120, 100, 75)


def _commonness(e: IndexEntry) -> tuple[int, int]:
    number = e.cell.sm.number
    return (_COMMON_GPUS.index(number) if number in _COMMON_GPUS else len(_COMMON_GPUS), number)


def _pull_examples(index: Index, repo_id: str, most: int = 40) -> str:
    """One pull command per package and torch/CUDA combo present (its most common GPU), at most ``most``."""
    firsts: dict[tuple[str, str], IndexEntry] = {}
    for e in sorted(index.entries, key=lambda e: (e.cell.package, e.cell.label.combo, _commonness(e))):
        firsts.setdefault((e.cell.package, e.cell.label.combo), e)
    if not firsts:
        return ""
    lines = [
        f"librarian pull {e.cell.package} --sm {e.cell.sm.sm} --torch {format_version(e.cell.label.torch)} "
        f"--cuda {format_version(e.cell.label.cuda)} --repo hf://datasets/{repo_id}"
        for e in firsts.values()
    ]
    more = (
        f"\n# ... and {len(lines) - most} more: the table below has every package, combo and GPU"
        if len(lines) > most
        else ""
    )
    return (
        "One command per package and torch/CUDA combo here (change `--sm` to your GPU):\n\n```bash\n"
        + "\n".join(lines[:most])
        + more
        + "\n```\n"
    )


def render_card_block(
    index: Index,
    repo_id: str,
    endpoint: str = "https://huggingface.co",
    install: str | None = None,
    revision: str | None = None,
    held: frozenset[str] = frozenset(),
) -> str:
    """librarian's part of the dataset card, markers included: how to install, and the coverage table.

    ``endpoint`` must carry no credentials (the caller strips them): the card is public. ``revision``: the
    commit the card is written on top of, and ``held``, the wheels it holds: the hash-pinned example names a
    wheel there, at that commit (as ``pull --requirements`` pins its lines), never ``main``, which moves.
    """
    table = render_coverage(coverage(index, f"hf://datasets/{repo_id}"))
    example = min(index.entries, key=_commonness) if index.entries else None
    package, page = "PACKAGE", "pages/sm89-torch2.9-cu128.html"
    pull = "librarian pull PACKAGE --sm 89 --torch 2.9"
    path, sha = "PATH_FROM_THE_INDEX", "SHA256_FROM_THE_INDEX"
    if example is not None:
        cell = example.cell
        package, page, path = example.name.distribution.replace("_", "-"), page_path(example), example.path
        sha = example.sha256
        pull = f"librarian pull {cell.package} --sm {cell.sm.sm} --torch {format_version(cell.label.torch)} --cuda {format_version(cell.label.cuda)}"
    find_links = f"{endpoint}/datasets/{repo_id}/resolve/main/{page}"
    get = (
        f"install it with `{install}`"
        if install
        else "it is not on PyPI under that name; the publisher's `[tool.librarian] install` setting puts its install line here"
    )
    examples = _pull_examples(index, repo_id)
    at = [e for e in index.entries if e.path in held]
    if revision and at:
        fixed = min(at, key=_commonness)
        name = fixed.name.distribution.replace("_", "-")
        url = f"{endpoint}/datasets/{repo_id}/resolve/{revision}/{quote(fixed.path)}"
        pinned = f"{name} @ {url} --hash=sha256:{fixed.sha256}"
    else:  # the first commit: nothing to pin to yet but the line's shape
        pinned = f"{package} @ {endpoint}/datasets/{repo_id}/resolve/COMMIT/{quote(path)} --hash=sha256:{sha}"
    variants = _variants_section(index, repo_id, endpoint)
    return f"""{BEGIN}
## Install

Wheels filed by librarian, one folder per GPU arch and torch/CUDA combo, with the layout
`{index.layout.path}`. The local version label (`+cu128torch2.9`) carries the CUDA line and torch minor;
the folder says which GPU the binaries serve. Install with `--no-deps` and a reinstall, so that your torch
stays as it is.

With nothing but pip or uv, from a hash-pinned line (any host serves it; pip refuses other bytes):

```bash
echo '{pinned}' > req.txt
pip install --no-deps --force-reinstall -r req.txt      # or: uv pip install --no-deps --reinstall -r req.txt
```

`librarian pull {package} --sm 89 --torch 2.9 --requirements req.txt --repo hf://datasets/{repo_id}` writes
that file for a machine, pinned to the commit it read; `index/<package>.json` lists every path and sha256.

With pip or uv, one page per GPU and combo (no librarian needed):

```bash
pip install --no-deps --force-reinstall --no-index {package} --find-links {find_links}
uv pip install --no-deps --reinstall --no-index {package} --find-links {find_links}
```

With librarian, which picks the wheel for this machine and checks its sha256 ({get}):

```bash
{pull} --repo hf://datasets/{repo_id} --install
```

{examples}
{variants}
One file, with huggingface_hub:

```python
from huggingface_hub import hf_hub_download
path = hf_hub_download("{repo_id}", "{path}", repo_type="dataset")
```

## Coverage

```
{table}
```

`index.json` and `index/<package>.json` list every wheel with its sha256, tags and what its binaries need.
librarian rewrites only this block, between its two markers; edit anything outside it.
{END}
"""


def _variants_section(index: Index, repo_id: str, endpoint: str) -> str:
    """Where the store keeps wheel variants: the uv line that picks the wheel for the GPU itself ("" where
    it keeps none)."""
    with_variant = [e for e in index.entries if e.variant is not None]
    if not with_variant:
        return ""
    package = min(with_variant, key=_commonness).cell.package
    page = f"{endpoint}/datasets/{repo_id}/resolve/main/{variants_page_path(package)}"
    return f"""
With uv's wheel variants (preview), which picks the build for this GPU and driver itself (no librarian
needed; uv 0.13.9 installs no torch-bound variant: it has no `abi_dependency` provider yet):

```bash
uv pip install --preview-features wheel-variants --no-index {project_name(package)} --find-links {page}
```
"""


def _set_key(lines: list[str], key: str, value: str) -> list[str]:
    """``key: value`` in place of the key's line (and its indented continuation), or appended."""
    at = next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
    if at is None:
        return [*lines, f"{key}: {value}"]
    end = at + 1
    while end < len(lines) and lines[end].startswith((" ", "- ")):
        end += 1
    return [*lines[:at], f"{key}: {value}", *lines[end:]]


def _front_matter(lines: list[str], license: str | None) -> list[str]:
    """The card's front matter lines with ``viewer: false``, librarian's tags and the license set."""
    out = _set_key(lines, "viewer", "false")
    if license:
        out = _set_key(out, "license", license)
    if not any(line.startswith("tags:") for line in out):
        out.append("tags:")
    at = next(i for i, line in enumerate(out) if line.startswith("tags:"))
    if out[at].strip() != "tags:":
        return out  # an inline list: theirs, left alone
    end = at + 1
    while end < len(out) and out[end].startswith(("- ", "  -")):
        end += 1
    have = {line.strip().lstrip("-").strip() for line in out[at + 1 : end]}
    return out[:end] + [f"- {tag}" for tag in CARD_TAGS if tag not in have] + out[end:]


def merge_card(current: str | None, block: str, repo_id: str, license: str | None = None) -> str:
    """The card with librarian's block replaced (or added), everything else as people wrote it.

    A card without the markers written by an older librarian is replaced whole; any other card keeps
    its text and gets the block at its end. The front matter always has ``viewer: false`` (the dataset
    viewer cannot read wheels), librarian's tags, and ``license`` when one is configured.
    """
    text = current or ""
    if _OLD_CARD_SIGN in text and BEGIN not in text:
        text = ""
    lines = text.splitlines()
    front: list[str] = []
    body = text
    if lines and lines[0].strip() == "---" and "---" in (line.strip() for line in lines[1:]):
        close = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        front, body = lines[1:close], "\n".join(lines[close + 1 :])
    if not body.strip():
        body = f"# {repo_id}: prebuilt CUDA / PyTorch extension wheels\n"
    start, end = body.find(BEGIN), body.find(END)
    if start >= 0 and end > start:
        body = body[:start] + block.rstrip("\n") + body[end + len(END) :]
    else:
        body = body.rstrip("\n") + "\n\n" + block
    header = "\n".join(["---", *_front_matter(front, license), "---"])
    return f"{header}\n{body.lstrip(chr(10)).rstrip(chr(10))}\n"


def _escape(text: str, quote: bool = True) -> str:
    """``html.escape``, imported on first use: reading the index (pull, ls) renders no page."""
    import html

    return html.escape(text, quote)
