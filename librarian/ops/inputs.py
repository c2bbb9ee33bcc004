"""The files a command is given: each file as named, a directory as every matching file inside it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from librarian.errors import BadInput
from librarian.safeio import input_problem


def expand_paths(paths: Sequence[Path], suffixes: tuple[str, ...]) -> list[Path]:
    """Each file as given; a directory becomes every file inside it (recursively) with one of ``suffixes``."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes))
            if not inside:
                raise BadInput(f"{path}: a directory with no {' or '.join(suffixes)} file inside")
            found += inside
        elif (problem := input_problem(path)) is None:
            found.append(path)
        else:
            raise BadInput(f"{path}: {problem if problem != 'no such file' else 'no such file or directory'}")
    return found
