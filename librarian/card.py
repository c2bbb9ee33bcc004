"""The dataset card (``README.md``): librarian's block of it, rendered from the index (how to pull and
install, one example per package and combo, the table of what is held, the variants), and merged into the
card a person wrote around it (front matter kept, our block replaced between its markers). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from librarian.build_failure import BuildFailure
from librarian.catalogue import page_path, project_name
from librarian.coords import format_version
from librarian.coverage import coverage, render_coverage
from librarian.index import Index, IndexEntry
from librarian.variants import page_path as variants_page_path

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


CARD_TEMPLATE = """{BEGIN}
## Install

Wheels filed by librarian, one folder per GPU arch and torch/CUDA combo, with the layout
`{layout_path}`. The local version label (`+cu128torch2.9`) carries the CUDA line and torch minor
(a wheel without one: its folder's `torch2.9-cu128`); the folder says which GPU the binaries serve. Install with `--no-deps` and a reinstall, so that your torch
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
{builds}
`index.json` and `index/<package>.json` list every wheel with its sha256, tags and what its binaries need.
librarian rewrites only this block, between its two markers; edit anything outside it.
{END}
"""


def render_card_block(
    index: Index,
    repo_id: str,
    endpoint: str = "https://huggingface.co",
    install: str | None = None,
    revision: str | None = None,
    held: frozenset[str] = frozenset(),
    failures: Sequence[BuildFailure] = (),
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
    pinned = _pinned_line(index, repo_id, endpoint, revision, held, package, path, sha)
    variants = _variants_section(index, repo_id, endpoint)
    builds = _builds_section(index, failures)
    return CARD_TEMPLATE.format(
        BEGIN=BEGIN,
        END=END,
        layout_path=index.layout.path,
        pinned=pinned,
        package=package,
        repo_id=repo_id,
        find_links=find_links,
        get=get,
        pull=pull,
        examples=examples,
        variants=variants,
        path=path,
        table=table,
        builds=builds,
    )


def _pinned_line(
    index: Index, repo_id: str, endpoint: str, revision: str | None, held: frozenset[str], package: str, path: str,
    sha: str,
) -> str:  # fmt: skip
    """The card's hash-pinned requirement line: a held wheel at ``revision``, else the example at ``main``
    (the first commit cannot name itself; the hash keeps other bytes out), else the line's shape."""
    at = [e for e in index.entries if e.path in held]
    if revision and at:
        fixed = min(at, key=_commonness)
        name = fixed.name.distribution.replace("_", "-")
        url = f"{endpoint}/datasets/{repo_id}/resolve/{revision}/{quote(fixed.path)}"
        pinned = f"{name} @ {url} --hash=sha256:{fixed.sha256}"
    elif index.entries:  # the first commit cannot name itself: main, which holds it; the hash keeps
        # other bytes out, and from the next change on the line names a commit
        pinned = f"{package} @ {endpoint}/datasets/{repo_id}/resolve/main/{quote(path)} --hash=sha256:{sha}"
    else:  # no wheel yet: the line's shape
        pinned = f"{package} @ {endpoint}/datasets/{repo_id}/resolve/COMMIT/{quote(path)} --hash=sha256:{sha}"
    return pinned


MAX_CARD_FAILURES = 20  # failed builds listed on the card (the rest counted)


def _builds_section(index: Index, failures: Sequence[BuildFailure]) -> str:
    """How the wheels were built (their build records: sources, toolchains, seconds) and the builds that
    failed (plan leaves their cells out until the source or toolchain changes); empty when neither."""
    built = {(e.sha256, e.build) for e in index.entries if e.build is not None}
    if not built and not failures:
        return ""
    lines = ["", "## Builds", ""]
    if built:
        records = [b for _, b in built if b is not None]
        sources = sorted({b.source.describe() for b in records})
        nvccs = sorted({b.toolchain.nvcc for b in records if b.toolchain.nvcc})
        hours = sum(b.seconds for b in records) / 3600
        lines.append(
            f"{len(records)} build(s) by librarian recorded in the index ({hours:.1f} h of compiling; nvcc "
            f"{', '.join(nvccs) or 'unknown'}), from {len(sources)} source(s): {'; '.join(sources[:5])}"
            f"{' ...' if len(sources) > 5 else ''}."
        )
    if failures:
        head = f"Failed builds ({len(failures)}), left out of `librarian plan` until their source or toolchain changes"
        lines += ["", f"{head} (`--retry-failed`):", ""]
        for f in sorted(failures, key=lambda f: f.path)[:MAX_CARD_FAILURES]:
            c = f.cells
            lines.append(
                f"- {c.package} {c.version} {c.combo_name} {', '.join('sm' + s for s in c.sms)} ({f.date}): "
                f"{f.reason[:200]}"
            )
        if len(failures) > MAX_CARD_FAILURES:
            lines.append(f"- and {len(failures) - MAX_CARD_FAILURES} more (`failures/` in this repo)")
    return "\n".join(lines) + "\n"


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
uv pip install --preview-features wheel-variants --no-deps --reinstall --no-index {project_name(package)} --find-links {page}
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
    lines = text.splitlines(keepends=True)
    front: list[str] = []
    body = text
    if lines and lines[0].strip() == "---" and "---" in (line.strip() for line in lines[1:]):
        close = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        front, body = [line.rstrip("\r\n") for line in lines[1:close]], "".join(lines[close + 1 :])
    if not body.strip():
        body = f"# {repo_id}: prebuilt CUDA / PyTorch extension wheels\n"
    start, end = body.find(BEGIN), body.find(END)
    if start >= 0 and end > start:
        body = body[:start] + block.rstrip("\n") + body[end + len(END) :]
    else:  # their text as they wrote it, line for line, and the block after it
        body = body + ("" if body.endswith("\n") else "\n") + ("" if body.endswith("\n\n") else "\n") + block
    header = "\n".join(["---", *_front_matter(front, license), "---"])
    return f"{header}\n{body}" + ("" if body.endswith("\n") else "\n")
