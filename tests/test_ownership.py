"""A wheel installs only its own files (issue 54, item 1): a member under torch's names, a script named like
the interpreter or pip, a ``.data`` path into another package, another distribution's metadata: publish and
adoption refuse it, verify names it, and pull refuses to install it (also over a name another distribution
of the target environment owns), one line naming the member and what it would overwrite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from librarian.coords import WheelName
from librarian.errors import Refused
from librarian.machine import Machine, Probed
from librarian.ops.machine.installer import check_own_files
from librarian.wheel.ownership import TORCH_ENVIRONMENT, foreign_members
from tests.builders import make_wheel
from tests.conftest import Run

NAME = WheelName.parse("tinykern-0.1.0-cp311-cp311-linux_x86_64.whl")
LABEL = ("--torch", "2.9", "--cuda", "12.8", "--sm", "89")


@pytest.mark.parametrize(
    ("member", "whose"),
    [
        ("torch/__init__.py", "torch's files"),
        ("torch.py", "torch's files"),
        ("triton/language/core.py", "triton's files"),
        ("tinykern-0.1.0.data/scripts/python", "the environment's python"),
        ("tinykern-0.1.0.data/scripts/pip3.11", "the environment's pip3.11"),
        ("tinykern-0.1.0.data/data/bin/python3", "the environment's python3"),
        ("tinykern-0.1.0.data/data/lib/python3.11/site-packages/torch/__init__.py", "torch's files"),
        ("tinykern-0.1.0.data/purelib/torch/__init__.py", "torch's files"),
        ("torch-2.9.0.dist-info/RECORD", "torch's metadata"),
    ],
)
def test_a_member_that_writes_another_distributions_files_is_named(member: str, whose: str) -> None:
    assert foreign_members(NAME, ["tinykern/__init__.py", member], TORCH_ENVIRONMENT) == [(member, whose)]


def test_a_wheels_own_files_and_its_namespace_family_are_its_own() -> None:
    own = [
        "tinykern/__init__.py",
        "tinykern/_C.cpython-311-x86_64-linux-gnu.so",
        "tinykern-0.1.0.dist-info/METADATA",
        "tinykern-0.1.0.data/scripts/tinykern-cli",
        "tinykern-0.1.0.data/headers/kern.h",
        "tinykern-0.1.0.data/data/share/tinykern/x.json",
        "torch_ext_helpers/__init__.py",  # a name of its own that starts like torch's
    ]
    assert foreign_members(NAME, own, TORCH_ENVIRONMENT) == []
    cudnn = WheelName.parse("nvidia_cudnn_cu12-9.0-py3-none-manylinux_2_17_x86_64.whl")
    assert foreign_members(cudnn, ["nvidia/cudnn/lib/libcudnn.so.9"], TORCH_ENVIRONMENT) == []
    torch = WheelName.parse("torch-2.9.0-cp311-cp311-linux_x86_64.whl")
    assert foreign_members(torch, ["torch/__init__.py"], TORCH_ENVIRONMENT) == []


@pytest.mark.parametrize(
    ("files", "data", "member"),
    [
        ({"torch/__init__.py": b"raise SystemExit"}, {}, "torch/__init__.py"),
        ({}, {"scripts/python": b"#!/bin/sh\n"}, "tinykern-0.1.0.data/scripts/python"),
        (
            {},
            {"data/lib/python3.11/site-packages/torch/__init__.py": b"x"},
            "tinykern-0.1.0.data/data/lib/python3.11/site-packages/torch/__init__.py",
        ),
    ],
)
def test_publish_and_adoption_refuse_it_and_nothing_is_filed(
    run: Run, tmp_path: Path, files: dict[str, bytes], data: dict[str, bytes], member: str
) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64",
                       {"tinykern/__init__.py": b"", **files}, data_files=data)  # fmt: skip
    refused = run("publish", str(wheel), *LABEL)
    assert refused.code == 2 and refused.err.count("\n") == 1 and "Traceback" not in refused.err
    assert (
        f"{member} would overwrite " in refused.err and "a wheel installs only its own files" in refused.err
    )
    assert not (tmp_path / "wheelhouse").exists() or not list((tmp_path / "wheelhouse").rglob("*.whl"))
    cell = tmp_path / "hand/tinykern/sm89/torch2.9-cu128"
    cell.mkdir(parents=True)
    shutil.copyfile(wheel, cell / wheel.name)
    adopted = run("reindex", "--adopt", "--repo", "hand")
    assert adopted.code == 1 and f"{member} would overwrite " in adopted.out
    assert (
        not (tmp_path / "hand/index.json").exists()
        or "tinykern" not in (tmp_path / "hand/index.json").read_text()
    )
    assert f"{member} would overwrite " in run("verify", "--deep", "--repo", "hand").out


def test_pull_refuses_to_install_over_a_name_another_installed_distribution_owns(tmp_path: Path) -> None:
    site = tmp_path / "venv/lib/python3.11/site-packages"
    for dist, top in (("numpy-2.3.0", "numpy"), ("tinykern-0.0.9", "tinykern")):
        (site / top).mkdir(parents=True)
        (site / f"{dist}.dist-info").mkdir()
        (site / f"{dist}.dist-info/RECORD").write_text(f"{top}/__init__.py,,\n{dist}.dist-info/RECORD,,\n")
    machine = Machine(search_path=Probed.found((str(site),), "test"))
    clean = make_wheel(tmp_path / "a", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")  # replaces its own
    check_own_files([clean], machine)
    greedy = make_wheel(tmp_path / "b", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64",
                        {"tinykern/__init__.py": b"", "numpy/__init__.py": b"broken"})  # fmt: skip
    with pytest.raises(Refused, match=r"numpy/__init__.py would overwrite numpy's files"):
        check_own_files([greedy], machine)


def test_pull_install_refuses_before_installing_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from librarian.ops.machine import installer

    installed: list[object] = []
    monkeypatch.setattr(installer, "install", lambda files, interpreter: installed.append(files))
    greedy = make_wheel(tmp_path / "b", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64",
                        {"tinykern/__init__.py": b"", "torch/__init__.py": b"broken"})  # fmt: skip
    machine = Machine(search_path=Probed.found((), "test"))
    with pytest.raises(Refused, match=r"torch/__init__.py would overwrite torch's files"):
        installer.install_checked([greedy], machine, force=True)  # not even --force
    assert installed == []
