"""One word per flag (issue 46 item 5): ``--platform`` took a wheel tag in pull and doctor and PyTorch's name
in build, plan and matrix, and both helps printed ``TAG``. Either form now means one platform everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from librarian.pytorch.releases import Platform
from tests.conftest import Run

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))


@pytest.mark.parametrize(
    ("text", "platform"),
    [
        ("linux-x86_64", Platform.LINUX_X86_64),
        ("manylinux_2_28_x86_64", Platform.LINUX_X86_64),
        ("linux_aarch64", Platform.LINUX_AARCH64),
        ("Windows-AMD64", Platform.WINDOWS_AMD64),
        ("win_amd64", Platform.WINDOWS_AMD64),
    ],
)
def test_both_vocabularies_parse_to_one_platform(text: str, platform: Platform) -> None:
    assert Platform.parse(text) is platform


def test_matrix_plan_pull_and_doctor_take_either_form(run: Run) -> None:
    by_name = json.loads(run("matrix", "--torch", "2.9", "--platform", "linux-aarch64", "--json").out)
    by_tag = json.loads(run("matrix", "--torch", "2.9", "--platform", "manylinux_2_28_aarch64", "--json").out)
    assert by_name == by_tag and by_name["combos"]
    assert run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0").code == 0
    for platform in ("linux-x86_64", "linux_x86_64"):
        got = run("pull", "tinykern", "--sm", "89", "--torch", "2.9", "--python", "3.12", "--platform", platform,
                  "-o", f"out-{platform}")  # fmt: skip
        assert got.code == 0, (platform, got.err)
        doctor = run("doctor", str(SAMPLES[0]), "--sm", "89", "--torch", "2.9", "--python", "3.10", "--platform",
                     platform)  # fmt: skip
        assert doctor.code == 0, (platform, doctor.out)
    planned = [run("plan", "tinykern==0.1.0", "--sm", "89", "--torch", "2.9", "--platform", p, "--json").out
               for p in ("linux-x86_64", "manylinux_2_28_x86_64")]  # fmt: skip
    assert planned[0] == planned[1]
    bad = run("matrix", "--platform", "macosx_11_0_arm64")
    assert bad.code == 2 and "linux-x86_64" in bad.err and "wheel tag" in bad.err


def test_the_help_names_both_forms(run: Run) -> None:
    for command in ("pull", "doctor", "plan", "build", "matrix"):
        shown = run(command, "--help").out
        assert "--platform" in shown and "linux-x86_64" in shown.replace("\n", " "), command
        assert "TAG " not in shown, command
