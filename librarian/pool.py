"""Work spread over a bounded pool of threads, results in order: inflating, hashing and reading release the GIL.

:func:`bounded_map` keeps at most ``window`` items queued or running; results come back in the items'
order, and the first failure (in that order) raises, as with one thread. Memory is what the running
items hold (``jobs`` of them): a queued item holds nothing until a thread takes it, a finished one only
its result. The window is wider than the threads, so that one big item at the head of the line (a 75 MB
``.so``) does not leave the other threads idle until it is done. Stdlib only.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, final

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M")


AHEAD = 16  # items queued per thread behind the oldest unfinished one


def default_jobs() -> int:
    """The cores this process may use (``sched_getaffinity`` where there is one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def jobs_for(jobs: int | None) -> int:
    """Threads reading one open file's members: ``jobs``, default the cores; one where there is no ``os.pread``
    (without it the threads would share one file position)."""
    return (jobs or default_jobs()) if hasattr(os, "pread") else 1


def bounded_map(
    pool: ThreadPoolExecutor, work: Callable[[T], R], items: Iterable[T], window: int
) -> Iterator[R]:
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

    At most ``AHEAD * jobs`` items are queued or running; ``jobs`` run at once.
    """
    if jobs <= 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix=name) as pool:
        yield from bounded_map(pool, work, items, AHEAD * jobs)


def largest_first(
    work: Callable[[T], R], items: Sequence[T], sizes: Sequence[int], jobs: int, name: str
) -> list[R]:
    """``work`` over ``items`` on ``jobs`` threads, the biggest (by ``sizes``) started first; results in the
    items' order, and the first failure in that order raises, as with one thread.

    In order, a wheel's biggest member (cupy's 75 MB ``thrust`` ``.so``, 30% of its native bytes) may be
    reached last and inflated by one thread while the others idle; started first, it overlaps the rest.
    Every item runs even after one has failed (which failure is first is known only at the end).
    """
    if jobs <= 1:
        return [work(item) for item in items]
    order = sorted(range(len(items)), key=lambda k: -sizes[k])

    def attempt(k: int) -> R | Exception:
        try:
            return work(items[k])
        except Exception as e:  # noqa: BLE001  # kept, raised below in the items' order (any type: as one thread would)
            return e

    outcomes: dict[int, R | Exception] = dict(
        zip(order, ordered_map(attempt, order, jobs, name), strict=True)
    )
    results: list[R] = []
    for k in range(len(items)):
        outcome = outcomes[k]
        if isinstance(outcome, Exception):
            raise outcome
        results.append(outcome)
    return results


def processes_largest_first(
    work: Callable[[T], R],
    items: Sequence[T],
    sizes: Sequence[int],
    jobs: int,
    meanwhile: Callable[[], M] | None = None,
) -> tuple[list[R], M | None]:
    """``work`` over ``items`` on ``jobs`` forked processes, the biggest started first, results in order:
    for pure-Python reading of many files (``doctor --env``: a CUDA torch's 112 libraries), which threads
    cannot overlap under the GIL. ``work`` and its results must pickle; where ``fork`` is not offered (macOS,
    Windows) or ``jobs <= 1``, it runs in this process. ``meanwhile`` runs in this thread once every worker
    is forked (never a thread alive across a fork), while they work; its result comes back beside theirs.
    The workers die with this process, however it dies."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if jobs <= 1 or len(items) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        results = [work(item) for item in items]
        return results, (meanwhile() if meanwhile is not None else None)
    order = sorted(range(len(items)), key=lambda k: -sizes[k])
    context = multiprocessing.get_context("fork")
    workers = min(jobs, len(items))
    with ProcessPoolExecutor(workers, context, _die_with, (os.getpid(),)) as pool:
        futures = [pool.submit(work, items[k]) for k in order]  # with fork, every worker starts at the first
        side = meanwhile() if meanwhile is not None else None
        done = {k: f.result() for k, f in zip(order, futures, strict=True)}
    return [done[k] for k in range(len(items))], side


def _die_with(parent: int) -> None:
    """In a forked worker: be killed when ``parent`` dies (Linux's parent-death signal), however it dies
    (``SIGKILL`` included), so that no worker outlives the command; where there is no such signal, a worker
    ends when its pipe to the parent closes, as ``concurrent.futures`` does."""
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux, or no libc to ask
        return
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


@final
class Pipeline:
    """Work submitted as it comes, run on ``jobs`` threads beside the caller; failures raised in submission order.

    At most ``AHEAD * jobs`` pieces are queued or running: :meth:`submit` waits for the oldest past that,
    so the caller (copying a wheel while its members are hashed) stays a bounded distance ahead; a piece
    holds no bytes until a thread runs it.
    """

    def __init__(self, jobs: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix=name)
        self._window = AHEAD * jobs
        self._pending: collections.deque[Future[None]] = collections.deque()
        self._failed = False

    def _oldest(self) -> None:
        future = self._pending.popleft()
        try:
            future.result()
        except BaseException:
            self._failed = True
            raise

    def submit(self, work: Callable[[], None]) -> None:
        """Queue ``work``; raise the failure of the oldest piece if the window is full and it failed."""
        self._pending.append(self._pool.submit(work))
        while len(self._pending) > self._window:
            self._oldest()

    def drain(self) -> None:
        """Wait for every piece; the first failure, in submission order, raises.

        After a piece has failed (and raised) this does nothing: a later piece's failure must not
        replace it. Call it in a ``finally``: a failure of the caller's own, about a later item, is
        then replaced by an earlier piece's, which is the one to report.
        """
        while self._pending and not self._failed:
            self._oldest()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *_exc_info: object) -> None:
        for future in self._pending:
            future.cancel()
        self._pool.shutdown(wait=True)  # no thread still reads a file the caller is about to close
