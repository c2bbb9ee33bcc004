"""One place chooses the inflater (librarian/wheel/inflate.py): the fastest installed, the stdlib's zlib
always. Every engine must read every wheel alike, its checks included."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from librarian.errors import BadInput, BadWheel
from librarian.wheel import inflate
from librarian.wheel.members import inspect_wheel
from tests.builders import make_wheel

SAMPLE = (
    Path(__file__).resolve().parent.parent
    / "samples"
    / "dist"
    / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
)
ENGINES = [e for e in ("zlib", "zlib-ng", "isal") if inflate._load(e) is not None]


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    def force(name: str) -> inflate.Engine:
        monkeypatch.setenv("LIBRARIAN_INFLATE", name)
        inflate.engine.cache_clear()
        return inflate.engine()

    yield force
    inflate.engine.cache_clear()


@pytest.mark.parametrize("name", ENGINES)
def test_every_engine_reads_alike(forced, name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert forced(name).name == name
    assert inspect_wheel(SAMPLE) == inspect_wheel(SAMPLE, jobs=1)
    forced("zlib")
    baseline = inspect_wheel(SAMPLE)
    forced(name)
    assert inspect_wheel(SAMPLE) == baseline
    # a lying member is refused in the same words by each engine
    bad = make_wheel(
        tmp_path, "tinykern", "1.0", "cp311-cp311-linux_x86_64", {"tinykern/_k.so": b"\x7fELF" + bytes(600)}
    )
    data = bytearray(bad.read_bytes())
    with zipfile.ZipFile(bad) as zf:
        info = zf.getinfo("tinykern/_k.so")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 2] ^= 0xFF  # corrupt the deflate stream
    bad.write_bytes(bytes(data))
    with pytest.raises(BadWheel, match=r"tinykern/_k.so: cannot inflate"):
        inspect_wheel(bad)


def test_the_fastest_installed_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIBRARIAN_INFLATE", raising=False)
    inflate.engine.cache_clear()
    try:
        expected = next(e for e in ("isal", "zlib-ng", "zlib") if e in ENGINES)
        assert inflate.engine().name == expected
    finally:
        inflate.engine.cache_clear()


def test_a_forced_engine_must_exist(forced) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BadInput, match="LIBRARIAN_INFLATE=brotli: expected one of isal, zlib-ng, zlib"):
        forced("brotli")


def test_the_inspect_bar_counts_bytes_of_the_wheel_file(tmp_path: Path) -> None:
    """A person compares the bar with the file's size: it counts compressed bytes, and ends at its total."""
    from librarian import progress

    class Recording:
        def __init__(self) -> None:
            self.tasks: list[tuple[str, int | None, list[int]]] = []

        def start(self, description: str, total: int | None, unit: str) -> object:
            steps: list[int] = []
            self.tasks.append((description, total, steps))

            class Task:
                def advance(self, amount: int = 1) -> None:
                    steps.append(amount)

            return Task()

        def stop(self, task: object) -> None:
            pass

    with zipfile.ZipFile(SAMPLE) as zf:
        so = zf.read("tinykern/_tinykern.so")
    # the sample (small members, read in a batch) and one whose .so is streamed (past the batch size)
    big = make_wheel(
        tmp_path,
        "tinykern",
        "0.2.0",
        "cp312-cp312-linux_x86_64",
        {"tinykern/_tinykern.so": so + bytes(1 << 20)},
    )
    for wheel in (SAMPLE, big):
        recording = Recording()
        progress.set_reporter(recording)  # type: ignore[arg-type]
        try:
            inspect_wheel(wheel)
        finally:
            progress.set_reporter(None)
        (description, total, steps) = recording.tasks[0]
        with zipfile.ZipFile(wheel) as zf:
            compressed = sum(i.compress_size for i in zf.infolist() if i.filename.endswith(".so"))
            plain = sum(i.file_size for i in zf.infolist() if i.filename.endswith(".so"))
        assert description == f"inspect {wheel.name}" and total == compressed < plain and sum(steps) == total
