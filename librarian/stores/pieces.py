"""How a big change is cut into commits the Hub handles well (huggingface.co: ~100 files a commit). Pure.

The order keeps the index honest: wheels first, then the index (generated files, never split: the
index must change in one step) with as many deletions as fit, then the remaining deletions. After any
prefix of the pieces, the index names no file that is not there; at worst the tree holds files the index
does not list yet (added wheels not indexed, or deleted wheels not yet removed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def plan_pieces(adds: Sequence[T], catalogue: Sequence[T], deletes: Sequence[T], cap: int) -> list[list[T]]:
    """The commits, in order: ``adds`` in pieces of ``cap``, the last one joined with the catalogue piece
    when both fit; the catalogue whole with the deletions that fit; the other deletions in pieces of ``cap``."""
    pieces = [list(adds[i : i + cap]) for i in range(0, len(adds), cap)]
    room = max(0, cap - len(catalogue))
    final = [*catalogue, *deletes[:room]]
    rest = deletes[room:]
    if pieces and len(pieces[-1]) + len(final) <= cap:
        pieces[-1] += final
    else:
        pieces.append(final)
    pieces += [list(rest[i : i + cap]) for i in range(0, len(rest), cap)]
    return [p for p in pieces if p]
