"""A wheel's own ``Requires-Dist`` on torch is a claim (issue 45 item 6): xformers 0.0.35 says
``torch>=2.10``; publishing it as ``+cu128torch2.9`` is refused without ``--allow-torch-mismatch`` (then
remembered), and pull and doctor count the requirement (pip never sees it: installs are ``--no-deps``)."""

from __future__ import annotations

from pathlib import Path

from librarian.wheel import torch_requirement
from tests.builders import make_wheel
from tests.conftest import Run
from tests.test_stable_abi import OLD
from tests.test_torch_lines import extension

HERE = ("--sm", "89", "--cuda", "12.8", "--python", "3.12", "--platform", "linux_x86_64")


def test_the_requirement_read_is_the_unconditional_one() -> None:
    assert torch_requirement(["numpy", "torch>=2.10"]) == ">=2.10"
    assert torch_requirement(['torch==2.9.1; extra == "cuda"', "Torch >=2.8,<2.12"]) == "<2.12,>=2.8"
    assert torch_requirement(["torch", "torchvision>=0.20"]) is None  # no version: nothing to hold a label to
    assert torch_requirement(["torch (>=2.9) ; python_version >= '3.10'"]) == ">=2.9"
    assert torch_requirement(["not a requirement ("]) is None


def needs_210(tmp_path: Path) -> Path:
    so = extension(("libtorch.so", "libc10.so"), {OLD: False})  # stable ABI: its bytes alone serve 2.9 on
    return make_wheel(tmp_path / "x", "needs210", "1.0", "cp312-cp312-linux_x86_64", {"needs210/_C.so": so},
                      requires_dist=("torch>=2.10", "numpy"))  # fmt: skip


def test_publish_refuses_a_label_the_requirement_excludes_and_pull_and_doctor_count_it(
    run: Run, tmp_path: Path
) -> None:
    wheel = needs_210(tmp_path)
    refused = run("publish", str(wheel), "--torch", "2.9", "--cuda", "12.8")
    assert refused.code == 2 and refused.err.count("\n") == 1, refused.err
    assert (
        "label says torch 2.9, its METADATA requires torch>=2.10; pass --allow-torch-mismatch to publish it anyway"
        in refused.err
    )
    filed = run("publish", str(wheel), "--torch", "2.9", "--cuda", "12.8", "--allow-torch-mismatch")
    assert filed.code == 0, filed.err
    shard = (tmp_path / "wheelhouse" / "index" / "needs210.json").read_text()
    assert '"requires_torch": ">=2.10"' in shard and "--allow-torch-mismatch" in shard
    on29 = run("pull", "needs210", "--torch", "2.9", *HERE, "-o", "a")
    assert on29.code == 1 and "its METADATA requires torch>=2.10" in on29.err, on29.err
    on211 = run("pull", "needs210", "--torch", "2.11", *HERE, "-o", "b")  # stable ABI: served from 2.9's cell
    assert on211.code == 0, on211.err
    stored = next((tmp_path / "wheelhouse").rglob("needs210-*.whl"))
    doctor = run("doctor", str(stored), "--torch", "2.9", *HERE)
    assert doctor.code == 1 and "its METADATA requires torch>=2.10" in doctor.out, doctor.out
    assert run("doctor", str(stored), "--torch", "2.10", *HERE).code == 0
    verified = run("verify")
    assert verified.code == 0, verified.out


def test_a_label_the_requirement_admits_is_filed_without_a_flag(run: Run, tmp_path: Path) -> None:
    done = run("publish", str(needs_210(tmp_path)), "--torch", "2.10", "--cuda", "12.8")
    assert done.code == 0, done.err
