"""The coverage table of an index: packages x torch/CUDA combos x GPU archs, with the holes. Pure.

``librarian ls`` prints it and the Hub store's dataset card shows it.
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass

from librarian.index import Index, IndexEntry

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


def render_coverage(cov: Coverage) -> str:
    """A text table: one row per package and combo, one column per sm; ``-`` marks a hole."""
    if not cov.rows:
        return f"{cov.location}: no wheels stored"
    head = ["package", "torch-cuda", *(f"sm{s}" for s in cov.sms)]
    table = [head]
    for (package, combo), cells in cov.rows.items():
        table.append([package, combo, *(_cell_text(cells.get(s, [])) for s in cov.sms)])
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]
    count = sum(len(es) for cells in cov.rows.values() for es in cells.values())
    holes = sum(1 for cells in cov.rows.values() for s in cov.sms if not cells.get(s))
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(
        f"{count} wheel file(s) in {cov.location}; {holes} hole(s) marked {HOLE}; cells show newest version (python tags)"
    )
    return "\n".join(lines)


def render_coverage_html(cov: Coverage) -> str:
    """The coverage table as a page people can open (``ls --html FILE``; a card can link it): the same rows
    and cells as :func:`render_coverage`, holes marked."""
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
