"""Memos by identity, for the few pure functions the judgement asks again and again of one wheel's facts.

A wheel of 16,000 members (flashinfer-cubin) made each ask cost a pass over every member, and an
``lru_cache`` keyed by value costs that pass again just to hash the facts. These memos key by the
arguments' identity instead, and hold the last few arguments alive, so an id is never reused while its
entry stands. Facts are frozen values: the same object always gives the same answer.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def by_identity(size: int = 8) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Memoize a function of positional arguments by their identity (``is``), keeping the last ``size``."""

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        entries: OrderedDict[tuple[int, ...], tuple[tuple[Any, ...], R]] = OrderedDict()

        @functools.wraps(fn)
        def wrapper(*args: Any) -> R:
            key = tuple(id(a) for a in args)
            found = entries.get(key)
            if found is not None and all(a is b for a, b in zip(found[0], args, strict=True)):
                entries.move_to_end(key)
                return found[1]
            result = fn(*args)
            entries[key] = (args, result)  # the arguments held: their ids stay theirs
            if len(entries) > size:
                entries.popitem(last=False)
            return result

        return wrapper

    return decorate
