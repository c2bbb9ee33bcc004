"""The coverage table of an index: packages x torch/CUDA combos x GPU archs, with the holes. Pure.

``librarian ls`` prints it and the Hub store's dataset card shows it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from librarian.index import Index, IndexEntry
from librarian.index_files import adopt_hint
from librarian.platforms import parse_platform

HOLE = "-"


@dataclass(frozen=True, slots=True)
class Coverage:
    """Per (package, combo) row and sm column, the wheels stored there."""

    location: str
    sms: tuple[str, ...]  # column heads: "80", "89", "90a", sorted by number
    rows: dict[tuple[str, str], dict[str, list[IndexEntry]]]  # (package, combo) -> sm -> entries
    files: int | None = (
        None  # the store's files the index accounts for (wheels, index, pages); None: not counted
    )
    serving: str = ""  # ls --torch: which torch line the table is cut to, and how the wheels serve it
    unindexed: int = 0  # wheel files in the tree of a store that has no index yet (a hand-made wheelhouse)


def coverage(index: Index, location: str) -> Coverage:
    """Pure: group the index into the coverage table."""
    rows: dict[tuple[str, str], dict[str, list[IndexEntry]]] = defaultdict(lambda: defaultdict(list))
    sms: set[tuple[int, str]] = set()
    for e in index.entries:
        rows[(e.cell.package, e.cell.label.combo)][e.cell.sm.sm].append(e)
        sms.add((e.cell.sm.number, e.cell.sm.sm))
    ordered = dict(sorted(rows.items(), key=lambda kv: (kv[0][0], _combo_key(kv[0][1]))))
    return Coverage(location, tuple(s for _, s in sorted(sms)), ordered)


def _combo_key(combo: str) -> tuple[int, ...]:
    torch, cuda = combo.removeprefix("torch").split("-cu")
    return (*(-int(x) for x in torch.split(".")), -int(cuda))


def _cell_text(entries: list[IndexEntry]) -> str:
    if not entries:
        return HOLE
    newest = max(e.name.version for e in entries)
    pythons = sorted({t.interpreter for e in entries if e.name.version == newest for t in e.name.tags})
    short = ",".join(p.removeprefix("cp") for p in pythons)
    return f"{newest.public} ({short})"


def platform_of(entry: IndexEntry) -> str:
    """The machine a wheel is for, in short: ``linux-x86_64``, ``windows-x86_64``, ``linux-aarch64``."""
    named = parse_platform(min(t.platform for t in entry.name.tags))
    os = {"win32": "windows", "darwin": "macos"}.get(named.os or "", named.os or "any")
    return f"{os}-{named.cpu}" if named.cpu else os


def render_coverage(cov: Coverage, width: int = 160) -> str:
    """A text table: one row per package and combo (and platform, where the store has several), one
    column per sm; ``-`` marks a hole. Past ``width`` characters the GPU columns fold into several
    tables, each with the row heads again (a wheel filed for 18 GPUs made one 260 columns wide)."""
    if not cov.rows and cov.unindexed:
        return f"{cov.location}: no wheels indexed, but {adopt_hint(cov.location, cov.unindexed)}"
    if not cov.rows:
        return f"{cov.location}: no wheels stored"
    platforms = {platform_of(e) for cells in cov.rows.values() for es in cells.values() for e in es}
    several = len(platforms) > 1
    heads = ["package", "torch-cuda", *(["platform"] if several else [])]
    rows: list[tuple[list[str], dict[str, list[IndexEntry]]]] = []
    for (package, combo), cells in cov.rows.items():
        for platform in sorted({platform_of(e) for es in cells.values() for e in es}) if several else [""]:
            mine = {
                s: [e for e in es if not several or platform_of(e) == platform] for s, es in cells.items()
            }
            rows.append(([package, combo, *([platform] if several else [])], mine))
    texts = [[*head, *(_cell_text(cells.get(s, [])) for s in cov.sms)] for head, cells in rows]
    names = [*heads, *(f"sm{s}" for s in cov.sms)]
    widths = [max(len(r[i]) for r in [names, *texts]) for i in range(len(names))]
    lines: list[str] = []
    for chunk in _fold(widths[len(heads) :], width - sum(w + 2 for w in widths[: len(heads)])):
        columns = [*range(len(heads)), *(len(heads) + i for i in chunk)]
        for row in [names, ["-" * w for w in widths], *texts]:
            lines.append("  ".join(row[i].ljust(widths[i]) for i in columns).rstrip())
        lines.append("")
    count = sum(len(es) for cells in cov.rows.values() for es in cells.values())
    holes = sum(1 for _, cells in rows for s in cov.sms if not cells.get(s))
    lines.append(
        f"{count} wheel file(s) in {cov.location}; {holes} hole(s) marked {HOLE}; cells show newest version (python tags)"
    )
    with_variant = [e for cells in cov.rows.values() for es in cells.values() for e in es if e.variant]
    variants = {e.variant_path: e.variant for e in with_variant if e.variant is not None}
    if variants:
        size = sum(v.size for v in variants.values())
        lines.append(
            f"{len(variants)} variant wheel(s) for {len(with_variant)} filed wheel(s), {size / 1e6:.1f} MB: one "
            "per distinct build, its members the build's own bytes (one extra copy of each build in a folder; "
            "on the Hub one more LFS object each, which Xet's chunk dedup stores mostly once: see the README)"
        )
    if cov.serving:
        lines.append(cov.serving)
    return "\n".join(lines)


def _fold(widths: list[int], room: int) -> list[list[int]]:
    """The GPU columns in groups that each fit ``room`` characters (at least one column a group)."""
    groups: list[list[int]] = [[]]
    used = 0
    for i, w in enumerate(widths):
        if groups[-1] and used + w + 2 > room:
            groups.append([])
            used = 0
        groups[-1].append(i)
        used += w + 2
    return groups


def render_coverage_html(cov: Coverage) -> str:
    """The coverage table as a page people can open (``ls --html FILE``; a card can link it): the same rows
    and cells as :func:`render_coverage`, holes marked."""
    import html  # imported where the page is rendered (ls --html), not by every reader of coverage

    esc = html.escape
    title = f"Coverage of {cov.location}"
    rows = []
    for (package, combo), cells in cov.rows.items():
        tds = "".join(
            f'<td class="hole">{HOLE}</td>' if not cells.get(s) else f"<td>{esc(_cell_text(cells[s]))}</td>"
            for s in cov.sms
        )
        rows.append(f"<tr><th>{esc(package)}</th><td>{esc(combo)}</td>{tds}</tr>")
    head = "".join(f"<th>sm{esc(s)}</th>" for s in cov.sms)
    holes = sum(1 for cells in cov.rows.values() for s in cov.sms if not cells.get(s))
    count = sum(len(es) for cells in cov.rows.values() for es in cells.values())
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title>\n<style>table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;"
        "padding:2px 6px;font-family:monospace}.hole{background:#fdd;text-align:center}</style></head>\n"
        f"<body>\n<h1>{esc(title)}</h1>\n<table>\n<tr><th>package</th><th>torch-cuda</th>{head}</tr>\n"
        + "\n".join(rows)
        + f"\n</table>\n<p>{count} wheel file(s); {holes} hole(s) marked {HOLE}; cells show the newest version "
        "(python tags)</p>\n</body></html>\n"
    )
