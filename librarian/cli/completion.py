"""Shell completion of values: ``--sm`` the real GPUs, ``--torch``/``--cuda`` the matrix's lines, package
names from the store's index as this machine has it (a local store's ``index.json``, or the Hub store's
cached one: offline, fast, best effort; nothing is fetched to complete a word).
"""

from __future__ import annotations

import json
from typing import Any

from librarian.coords import format_version
from librarian.errors import LibrarianError


def _starting(values: list[str], incomplete: str) -> list[str]:
    return [v for v in dict.fromkeys(values) if v.startswith(incomplete)]


def sm_values(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The GPUs that exist: ``89`` for ``--sm 8``."""
    from librarian.gpus import known_gpus

    return _starting(
        [g.arch.sm for g in known_gpus()], incomplete.lower().removeprefix("sm_").removeprefix("sm")
    )


def torch_values(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The torch lines PyTorch shipped, newest first."""
    from librarian.pytorch.matrix import load_matrix

    return _starting([format_version(t) for t in load_matrix().torch_versions()], incomplete)


def cuda_values(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The CUDA lines PyTorch shipped (of the ``--torch`` given, if one is)."""
    from librarian.pytorch.matrix import load_matrix

    matrix = load_matrix()
    torch = (ctx.params or {}).get("torch") if ctx is not None else None
    torch = torch[0] if isinstance(torch, list) and torch else torch
    try:
        combos = matrix.combos(torch=torch) if isinstance(torch, str) else matrix.all_combos
    except ValueError:
        combos = matrix.all_combos
    return _starting([format_version(c) for c in sorted({c.cuda for c in combos}, reverse=True)], incomplete)


def preset_values(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The machine presets."""
    from librarian.presets import presets

    return _starting(sorted(presets()), incomplete)


def package_values(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """Package names from the store's index on this machine; none when it has none (never an error)."""
    try:
        return _starting(
            sorted(_packages((ctx.params or {}).get("repo") if ctx is not None else None)), incomplete
        )
    except (
        OSError,
        ValueError,
        AttributeError,
        TypeError,
        LibrarianError,
    ):  # never a traceback in the user's shell
        return []


def _packages(repo: str | None) -> list[str]:
    # Imported here, as every completer's: completion runs on each TAB, and loads only what it answers.
    from librarian.config import load_settings
    from librarian.stores import open_store
    from librarian.stores.base import CachedReads

    # Through the store, from what this machine holds (a local index, the Hub's read cache): no fetch.
    store = open_store(load_settings(repo).repo)
    data = store.cached_file("index.json") if isinstance(store, CachedReads) else None
    packages = json.loads(data).get("packages", {}) if data else {}
    return list(packages) if isinstance(packages, dict) else []
