"""``pull --build`` from values (issue 53, item 7): the packages the store holds are fetched beside what is
built, and a build is filed into the store only with ``--publish``. The builder is a stand-in that records
where it was told to file (the real builds are tests/test_build.py's, which need nvcc and minutes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from librarian.ops.machine import pull_build
from librarian.ops.resolve import Wants
from librarian.stores.local import LocalStore
from tests.builders import make_wheel
from tests.conftest import Run

HERE = ("--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--python", "3.12")
SAMPLES = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))


class Quiet:
    def say(self, text: str) -> None:
        pass

    def step(self, text: str) -> None:
        pass

    def clear(self) -> None:
        pass


@pytest.fixture
def store(run: Run, tmp_path: Path) -> LocalStore:
    assert run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0").code == 0
    return LocalStore(tmp_path / "wheelhouse")


def wants_here() -> Wants:
    from librarian.cli.options import MachineFlags, machine_of

    machine = machine_of(MachineFlags("89", "2.9", "13.0", "3.12", "linux-x86_64", driver="13.0"))
    return Wants.of(machine)


@pytest.mark.parametrize("publish", [False, True])
def test_the_stored_package_is_fetched_and_the_build_filed_only_with_publish(
    store: LocalStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, publish: bool
) -> None:
    from librarian.config import load_layout
    from librarian.ops.build import build_and_file

    told: list[Any] = []

    def stand_in(request: Any, settings: Any, options: Any, to: Any, say: Any, step: Any, **_: Any) -> Any:
        told.append(to)
        wheel = make_wheel(
            to.out, "otherkern", "1.0+cu130torch2.9", "cp312-cp312-linux_x86_64", {"o/x.py": b""}
        )
        return build_and_file.BuildOutcome(wheel, wheel.name, tmp_path / "log", None, "8.9", None)  # type: ignore[arg-type]

    monkeypatch.setattr(build_and_file, "build_and_file", stand_in)
    wants = wants_here()
    from librarian.pytorch.matrix import load_matrix

    request = build_and_file.machine_request(load_matrix(), "otherkern", wants, "otherkern")
    on_miss = pull_build.OnMiss({"otherkern": request}, wants.machine, publish=publish)
    out = tmp_path / "out"
    out.mkdir()
    report, built = pull_build.pull_or_build(
        store, load_layout(), ["tinykern", "otherkern"], wants, out, compatible=False, requirements=None,
        on_miss=on_miss, voice=Quiet(),
    )  # fmt: skip
    assert [f.name for f in report.files] == ["tinykern-0.1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl"]
    assert (out / report.files[0].name).is_file()  # the stored one, fetched
    assert [b.name for b in built] == ["otherkern-1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl"]
    (to,) = told
    assert (to.store is not None) is publish  # filed into the store only when asked


@pytest.mark.parametrize(
    ("flags", "floor"), [((), None), (("--publish",), (2, 28)), (("--publish", "--glibc", "2.34"), (2, 34))]
)
def test_a_build_filed_into_the_store_is_held_to_the_floor_plan_counts_at(
    run: Run, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], floor: tuple[int, int] | None
) -> None:
    """Issue 53, item 4: pull --build --publish filed a wheel needing GLIBC_2.32 that plan (at 2.28) then
    called missing; for the shared store it is held to plan's floor (--glibc moves it), as build holds it;
    for this machine alone, to the machine's own glibc."""
    seen: list[object] = []

    def stand_in(
        packages: object, source: object, wants: object, repair: object, floor: object = None
    ) -> object:
        seen.append(floor)
        raise SystemExit(0)  # what matters is what it was asked

    monkeypatch.setattr(pull_build, "build_requests", stand_in)
    run("pull", "tinykern", *HERE, "--build", *flags)
    assert seen == [floor]


def test_a_machine_build_can_create_its_store_and_create_goes_with_publish(run: Run) -> None:
    bad = run("pull", "tinykern", "--sm", "89", "--torch", "2.9", "--create")
    assert bad.code == 2 and "--create: goes with --build --publish" in bad.err
