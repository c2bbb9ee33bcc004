"""``pool.processes_largest_first``: forked workers, the biggest item first, results in the items' order, and
the caller's own work done meanwhile (doctor --env reads torch's exports so)."""

from __future__ import annotations

import os

from librarian.pool import processes_largest_first


def _pid_and_square(n: int) -> tuple[int, int]:
    return os.getpid(), n * n


def test_results_come_back_in_order_from_other_processes_with_the_callers_own() -> None:
    items = [3, 1, 4, 1, 5, 9, 2, 6]
    results, side = processes_largest_first(_pid_and_square, items, items, 2, lambda: os.getpid())
    assert [r for _, r in results] == [n * n for n in items]
    assert side == os.getpid()
    assert all(pid != os.getpid() for pid, _ in results)  # read by forked workers, not here


def test_one_job_runs_here() -> None:
    results, side = processes_largest_first(_pid_and_square, [2, 3], [2, 3], 1)
    assert results == [(os.getpid(), 4), (os.getpid(), 9)] and side is None
