"""A Requires-Dist on torch that admits exactly one torch line confirms an exact wheel's line, and its local
label the CUDA line (issue 52, item 4): an unlabelled wheel bound to torch's C++ ABI with ``torch==2.4.0``
runs on torch 2.4 (it was "may run (some parts unknown)"), ``==2.4.0+cu121`` says CUDA 12.1 as a label
would; a requirement that admits two lines confirms nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.demands.torch import pinned_cuda, pinned_line
from tests.builders import make_wheel
from tests.conftest import Run
from tests.test_torch_lines import C10, extension

HERE = ("--sm", "89", "--python", "3.12", "--platform", "linux_x86_64", "--driver", "13.0")


@pytest.mark.parametrize(
    ("requirement", "line"),
    [("==2.4.0", (2, 4)), (">=2.4,<2.5", (2, 4)), ("~=2.4.0", (2, 4)), ("==2.4.0+cu121", (2, 4)),
     (">=2.4", None), (">=2.4,<2.6", None), ("<1.0", None)],
)  # fmt: skip
def test_a_requirement_names_a_line_only_where_it_admits_one(
    requirement: str, line: tuple[int, int] | None
) -> None:
    from packaging.specifiers import SpecifierSet

    assert pinned_line(SpecifierSet(requirement)) == line
    assert pinned_cuda(SpecifierSet(requirement)) == ((12, 1) if "+cu121" in requirement else None)


def pinned(tmp_path: Path, name: str, requirement: str) -> Path:
    so = extension(("libtorch.so", "libc10.so"), {C10: False})  # exact: a mangled c10 symbol, libcudart 12
    return make_wheel(tmp_path / name, name, "1.0", "cp312-cp312-linux_x86_64", {f"{name}/_C.so": so},
                      requires_dist=(f"torch{requirement}",))  # fmt: skip


def test_an_unlabelled_exact_wheel_pinned_to_one_line_runs_there(run: Run, tmp_path: Path) -> None:
    wheel = pinned(tmp_path, "pinkern", "==2.4.0")
    there = run("doctor", str(wheel), "--torch", "2.4", "--cuda", "12.4", *HERE, "-v")  # -v: whole cells
    assert there.code == 0 and "will NOT" not in there.out and "may run" not in there.out, there.out
    assert "torch 2.4 (its Requires-Dist: torch==2.4.0)" in there.out
    assert run("doctor", str(wheel), "--torch", "2.5", "--cuda", "12.4", *HERE).code == 1
    loose = pinned(tmp_path, "loosekern", ">=2.4")  # two lines and more: the line stays unknown
    assert "may run" in run("doctor", str(loose), "--torch", "2.4", "--cuda", "12.4", *HERE).out


def test_a_pins_local_label_says_the_cuda_line(run: Run, tmp_path: Path) -> None:
    wheel = pinned(tmp_path, "cukern", "==2.4.0+cu121")
    ok = run("doctor", str(wheel), "--torch", "2.4", "--cuda", "12.4", *HERE)
    assert ok.code == 0 and "CUDA 12.1 (its torch pin)" in ok.out, ok.out
    other = run("doctor", str(wheel), "--torch", "2.4", "--cuda", "11.8", *HERE)
    assert other.code == 1 and "CUDA 12.1 (its torch pin)" in other.out
