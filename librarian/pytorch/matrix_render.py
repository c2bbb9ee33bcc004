"""What a selection of the matrix is shown as: GitHub Actions build jobs (split past Actions' 256-job
limit), the ``--json`` document, and the text table; each field inferred rather than read from a source
(a row's ``uncertain``) is marked so."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from librarian.coords import MajorMinor, format_cuda, format_version
from librarian.errors import BadInput
from librarian.pytorch.matrix import Combo, Matrix, Selection

INFERRED_NOTE = (
    "* inferred, not read from a source (the matrix row's 'uncertain'); 'matrix refresh' reads the index"
)

GITHUB_MAX_JOBS = 256  # GitHub Actions' limit on the jobs one matrix generates


def github_matrices(include: list[dict[str, Any]], split: bool = False) -> dict[str, Any]:
    """``include`` jobs as one Actions ``strategy.matrix``; past 256 jobs, ``{"matrices": [...]}`` of at most
    256 each when ``split``, else BadInput naming the count and the ways to narrow it."""
    if not include:
        raise BadInput("no build jobs: nothing matches the selection")
    if len(include) <= GITHUB_MAX_JOBS:
        return {"include": include}
    if not split:
        raise BadInput(
            f"{len(include)} jobs: past GitHub Actions' limit of {GITHUB_MAX_JOBS} jobs per matrix; "
            "narrow the selection (--newest, --python, --platform, --cuda) or pass --split"
        )
    parts = [include[i : i + GITHUB_MAX_JOBS] for i in range(0, len(include), GITHUB_MAX_JOBS)]
    return {"matrices": [{"include": p} for p in parts]}


def combo_job(matrix: Matrix, c: Combo) -> dict[str, Any]:
    """One build job of a combo, as Actions matrix entries spell it; its arch list is never empty."""
    arch = matrix.build_arch_list(c.cuda, c.platform, c.torch)
    return {
        "torch": format_version(c.torch),
        "cuda": format_version(c.cuda),
        "python": c.python.version,
        "python-tag": str(c.python),
        "platform": c.platform.value,
        "runs-on": c.platform.runs_on,
        "container": c.platform.container(c.cuda),
        "label": str(c.label),
        "status": c.status.value,
        "TORCH_CUDA_ARCH_LIST": arch.arch_list,
        "arch-source": arch.source,
        "torch-install": c.torch_install,
    }


def github_matrix(matrix: Matrix, sel: Selection, *, split: bool = False) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix``: one ``include`` job per selected (torch, CUDA, Python, platform)."""
    return github_matrices([combo_job(matrix, c) for c in matrix.select(sel)], split)


def matrix_json(combos: Iterable[Combo]) -> dict[str, Any]:
    """The ``--json`` document: ``{"schema": 1, "combos": [...]}``."""
    return {
        "schema": 1,
        "combos": [
            {
                "torch": format_version(c.torch),
                "cuda": format_version(c.cuda),
                "label": str(c.label),
                "python": str(c.python),
                "platform": c.platform.value,
                "status": c.status.value,
                "abi": c.abi.value if c.abi else None,
                "inferred": list(c.inferred),
            }
            for c in combos
        ],
    }


def render_table(combos: Iterable[Combo]) -> str:
    """A text table, one line per (torch, CUDA) with its Pythons and platforms."""
    groups: dict[tuple[MajorMinor, MajorMinor], list[Combo]] = {}
    for c in combos:
        groups.setdefault((c.torch, c.cuda), []).append(c)
    rows = [("TORCH", "CUDA", "LABEL", "STATUS", "ABI", "PYTHON", "PLATFORMS")]
    marked = False
    for (torch, cuda), cs in sorted(groups.items()):
        pys = sorted({c.python for c in cs}, key=lambda p: p.key)
        inferred = {f for c in cs for f in c.inferred}
        marked |= bool(inferred & {"abi", "python", "platforms"})

        def mark(text: str, field: str, inferred: set[str] = inferred) -> str:
            return text + "*" if field in inferred else text

        rows.append(
            (
                format_version(torch),
                format_version(cuda),
                f"cu{format_cuda(cuda)}torch{format_version(torch)}",
                min((c.status for c in cs), key=lambda s: s.rank).value,
                mark(",".join(sorted({c.abi.value if c.abi else "?" for c in cs})), "abi"),
                mark(" ".join(map(str, pys)), "python"),
                mark(" ".join(sorted({c.platform.value for c in cs})), "platforms"),
            )
        )
    if len(rows) == 1:
        return "no combos match\n"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows
    )
    return table + (INFERRED_NOTE + "\n" if marked else "")
