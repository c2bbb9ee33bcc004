"""Members read on a pool of threads: the same bytes, the same answers and the same first error as one thread."""

from __future__ import annotations

import functools
import random
import re
import time
import zipfile
from pathlib import Path

import pytest

from librarian.coords import Label
from librarian.errors import BadWheel
from librarian.pool import Pipeline, largest_first
from librarian.wheel import record
from librarian.wheel.record import verify_record
from librarian.wheel.relabel import retag
from tests.builders import make_wheel, record_hash
from tests.test_wheelfile import BAD, TAGS

LABEL = Label.parse("cu128torch2.8")


def _many(directory: Path, count: int = 700, **kwargs: object) -> Path:
    """A wheel of ``count`` small members (several batches) and two big ones, in a shuffled order."""
    rng = random.Random(7)
    files = {f"tinykern/m{i:04d}.py": rng.randbytes(rng.randrange(0, 3000)) for i in range(count)}
    files["tinykern/_big.so"] = rng.randbytes(3 << 20) + bytes(3 << 20)
    files["tinykern/_mid.so"] = bytes(range(256)) * 9000
    order = list(files)
    rng.shuffle(order)
    return make_wheel(directory, tags=TAGS, files={k: files[k] for k in order}, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("verify", [True, False])
def test_retag_output_is_the_same_bytes_whatever_the_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verify: bool
) -> None:
    monkeypatch.setattr(record, "_BATCH", 64 << 10)  # many batches in flight, not a few
    monkeypatch.setattr(record, "_INLINE", 1000)  # some members checked in the calling thread
    src = _many(tmp_path / "src")
    outputs = [
        retag(src, LABEL, tmp_path / f"j{jobs}", verify=verify, jobs=jobs).read_bytes() for jobs in (1, 2, 5)
    ]
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_wheel_gives_the_same_error_whatever_the_jobs(tmp_path: Path, case: str) -> None:
    messages = []
    for jobs in (1, 4):
        (tmp_path / f"j{jobs}").mkdir()
        src = BAD[case][0](tmp_path / f"j{jobs}")
        for check in ("retag", "verify_record"):
            with pytest.raises(BadWheel) as caught:
                if check == "retag":
                    retag(src, LABEL, tmp_path / f"out{jobs}", jobs=jobs)
                else:
                    verify_record(src, jobs=jobs)
            messages.append(str(caught.value).replace(f"j{jobs}", "J"))
        assert list((tmp_path / f"out{jobs}").iterdir()) == []
    assert messages[:2] == messages[2:]


@pytest.mark.parametrize(
    "inline", [0, 1000, 1 << 20]
)  # none, some, all members checked in the calling thread
@pytest.mark.parametrize("jobs", [1, 3])
def test_the_first_liar_in_member_order_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, inline: int
) -> None:
    monkeypatch.setattr(record, "_BATCH_MEMBERS", 2)
    monkeypatch.setattr(record, "_INLINE", inline)
    lies = {f"tinykern/m{i:04d}.py": record_hash(b"not this") for i in (40, 400, 650)}
    src = _many(tmp_path / "src", record_override=lies)
    with zipfile.ZipFile(src) as zf:
        first = next(i.filename for i in zf.infolist() if i.filename in lies)
    for check in (
        lambda: retag(src, LABEL, tmp_path / "out", jobs=jobs),
        lambda: verify_record(src, jobs=jobs),
    ):
        with pytest.raises(BadWheel, match=re.escape(f"{first}: RECORD says")):
            check()


def _fail(i: int) -> None:
    time.sleep(0.0005 * (i % 7))  # later pieces often fail first
    raise ValueError(f"piece {i}")


def test_the_pipeline_reports_the_earliest_failure_not_the_latest() -> None:
    with Pipeline(3, "test") as pipeline, pytest.raises(ValueError, match=r"^piece 0$"):
        try:
            for i in range(200):
                pipeline.submit(functools.partial(_fail, i))
        finally:
            pipeline.drain()  # as retag calls it: must not replace piece 0's failure with a later one


def test_largest_first_starts_the_biggest_and_answers_in_order() -> None:
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        time.sleep(0.001)
        return i * i

    sizes = [1, 5, 2, 90, 3, 40]
    assert largest_first(work, list(range(6)), sizes, 2, "test") == [0, 1, 4, 9, 16, 25]
    assert set(started[:2]) == {3, 5}  # the two biggest, before any small one
    assert largest_first(work, [2, 3], [1, 1], 1, "test") == [4, 9]  # one thread: in order, no pool


def test_largest_first_raises_the_first_failure_in_item_order() -> None:
    def work(i: int) -> int:
        if i in (1, 4):
            raise ValueError(f"item {i}")
        return i

    # item 4 is the biggest and fails first in time; item 1 comes first in order and is the one reported
    with pytest.raises(ValueError, match=r"^item 1$"):
        largest_first(work, list(range(6)), [1, 2, 3, 4, 99, 5], 3, "test")


@pytest.mark.parametrize(
    ("count", "size", "jobs", "threads"), [(300, 1_000, None, 1), (4, 300_000, None, 2), (300, 1_000, 2, 2)]
)
def test_small_members_are_inspected_on_one_thread_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, size: int, jobs: int | None, threads: int
) -> None:
    """Small members cost Python work, which threads only fight over (16,000 cubins of 2 KB: 1.66 s on one
    thread, 2.21 s on two): one thread by default; ``-j`` still says how many."""
    from librarian.wheel import members

    rng = random.Random(size)
    files = {f"pkg/k{i}.so": rng.randbytes(size) for i in range(count)}  # random: they do not compress
    wheel = make_wheel(tmp_path, "pkg", "0.1.0", "cp311-cp311-linux_x86_64", files)
    monkeypatch.setattr(members, "jobs_for", lambda jobs: jobs or 2)  # a 2-core machine, whatever this is
    used: list[int] = []
    real = members.largest_first

    def spy(work, items, sizes, workers, what):  # type: ignore[no-untyped-def]
        used.append(workers)
        return real(work, items, sizes, workers, what)

    monkeypatch.setattr(members, "largest_first", spy)
    facts = members.inspect_wheel(wheel, jobs=jobs)  # random bytes: no binary format, read all the same
    assert len(facts.binaries) == count and used == [threads]
