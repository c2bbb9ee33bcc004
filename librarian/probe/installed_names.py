"""The top-level names installed in an environment and whose they are: what a distribution declares
(``top_level.txt``), what its RECORD lists, and the names other distributions own, which a wheel about to
be installed must not write (:mod:`librarian.wheel.ownership`). Reads are bounded; nothing is imported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from librarian.probe.dist_info import MAX_RECORD, declared_tops
from librarian.safeio import read_regular


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
