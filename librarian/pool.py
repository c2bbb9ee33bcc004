"""Work spread over a bounded pool of threads, results in order: inflating, hashing and reading release the GIL.

:func:`bounded_map` keeps at most ``window`` items in flight, so memory is a few items, never all of
them; results come back in the items' order, and the first failure (in that order) raises, as with one
thread. Stdlib only.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, final

T = TypeVar("T")
R = TypeVar("R")


def default_jobs() -> int:
    """The cores this process may use (``sched_getaffinity`` where there is one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def bounded_map(pool: ThreadPoolExecutor, work: Callable[[T], R], items: Iterable[T], window: int) -> Iterator[R]:
    """``pool.map`` with at most ``window`` items in flight; unstarted work is cancelled if the caller stops."""
    pending: collections.deque[Future[R]] = collections.deque()
    try:
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def ordered_map(work: Callable[[T], R], items: Iterable[T], jobs: int, name: str) -> Iterator[R]:
    """``work`` over ``items`` on ``jobs`` threads (``jobs <= 1``: in this thread), results in order.

    At most ``2 * jobs`` items are in flight: one running per thread and one ready behind it.
    """
    if jobs <= 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix=name) as pool:
        yield from bounded_map(pool, work, items, 2 * jobs)


@final
class Pipeline:
    """Work submitted as it comes, run on ``jobs`` threads beside the caller; failures raised in submission order.

    At most ``2 * jobs`` pieces are in flight: :meth:`submit` waits for the oldest past that, so the
    caller (copying a wheel while its members are hashed) stays a bounded distance ahead.
    """

    def __init__(self, jobs: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix=name)
        self._window = 2 * jobs
        self._pending: collections.deque[Future[None]] = collections.deque()

    def submit(self, work: Callable[[], None]) -> None:
        """Queue ``work``; raise the failure of the oldest piece if the window is full and it failed."""
        self._pending.append(self._pool.submit(work))
        while len(self._pending) > self._window:
            self._pending.popleft().result()

    def drain(self) -> None:
        """Wait for every piece; the first failure, in submission order, raises."""
        while self._pending:
            self._pending.popleft().result()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        for future in self._pending:
            future.cancel()
        self._pool.shutdown(wait=True)  # no thread still reads a file the caller is about to close
