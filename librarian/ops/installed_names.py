"""The top-level names installed in an environment and whose they are: what a distribution declares
(``top_level.txt``), what its RECORD lists, and the names other distributions own, which a wheel about to
be installed must not write (:mod:`librarian.wheel.ownership`). Reads are bounded; nothing is imported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from librarian.safeio import read_regular

MAX_RECORD = 64 << 20  # bytes of RECORD read per distribution (torch's is ~2 MB)


def declared_tops(info: Path, name: str) -> tuple[list[str], str]:
    """The top-level names a distribution installed, and where they were learnt: its ``top_level.txt``, else
    its own name as a package folder (``my-pkg`` -> ``my_pkg``)."""
    try:
        listed = (info / "top_level.txt").read_text(encoding="utf-8", errors="replace").splitlines()[:1000]
    except OSError:
        listed = []
    tops = [
        t.strip()
        for t in listed
        if t.strip() and "/" not in t and "\\" not in t and t.strip() not in (".", "..")
    ]
    if tops:
        return tops, "top_level.txt"
    return list(
        dict.fromkeys((name, name.replace("-", "_"), name.lower().replace("-", "_")))
    ), "its package folder"


def names_of_others(sites: Sequence[Path], package: str) -> frozenset[str]:
    """The top-level names in ``sites`` (folders and modules: ``torch``, ``numpy``, ``six``) that are not the
    installed files of ``package`` itself (its RECORD's, or its ``top_level.txt``'s): what a wheel of
    ``package`` must not write, for they are another distribution's."""
    names: set[str] = set()
    own: set[str] = set()
    for site in sites:
        try:
            entries = [e.name for e in os.scandir(site)][:100_000]
        except OSError:
            continue
        for entry in entries:
            if entry.endswith((".dist-info", ".egg-info")):
                name = entry.rsplit("-", 1)[0] if entry.endswith(".dist-info") else entry.split("-", 1)[0]
                if canonicalize_name(name) == canonicalize_name(package):
                    own.update(_installed_tops(site / entry, name))
                continue
            names.add(entry.split(".", 1)[0])
    return frozenset(names - own)


def _installed_tops(info: Path, name: str) -> set[str]:
    """The top-level names a distribution's RECORD lists (bounded), else its ``top_level.txt``'s."""
    try:
        text = read_regular(info / "RECORD", MAX_RECORD).decode("utf-8", errors="replace")
    except OSError:
        return set(declared_tops(info, name)[0])
    return {
        line.split("/", 1)[0].split(",", 1)[0].split(".", 1)[0]
        for line in text.splitlines()[:200_000]
        if line
    }
