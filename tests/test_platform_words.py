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


@pytest.mark.parametrize(
    ("word", "tag"),
    [
        (
            "linux-x86_64",
            "manylinux_2_28_x86_64",
        ),  # PyTorch's word: its builders' glibc, manylinux wheels too
        ("linux-aarch64", "manylinux_2_28_aarch64"),
        ("windows-x86_64", "win_amd64"),  # the word ls prints in its platform column
        ("windows-amd64", "win_amd64"),
        ("macos-arm64", "macosx_11_0_arm64"),
        ("manylinux_2_17_x86_64", "manylinux_2_17_x86_64"),  # a wheel tag means exactly that
        ("linux_x86_64", "linux_x86_64"),
    ],
)
def test_every_word_is_one_platform_tag(word: str, tag: str) -> None:
    from librarian.platforms import platform_tag_of

    assert platform_tag_of(word) == tag
    assert platform_tag_of("linux-x86_64", (2, 35)) == "manylinux_2_35_x86_64"  # --glibc says otherwise


def test_pytorchs_word_and_ls_s_word_pull_and_doctor_a_manylinux_wheel(run: Run, tmp_path: Path) -> None:
    """Issue 53, item 1: ``--platform linux-x86_64`` refused every manylinux wheel; ``windows-x86_64`` (ls's
    own word) was not a platform tag; a described machine kept this host's libstdc++ and OS words."""
    from tests.builders import make_wheel

    wheel = make_wheel(
        tmp_path / "d", "plainkern", "1.0", "py3-none-manylinux_2_28_x86_64", {"plainkern/x.py": b""}
    )
    assert (
        run("publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--trust-sm").code == 0
    )
    for word in ("linux-x86_64", "manylinux_2_28_x86_64"):
        got = run("pull", "plainkern", "--sm", "89", "--torch", "2.9", "--python", "3.12", "--platform", word,
                  "-o", f"o-{word}")  # fmt: skip
        assert got.code == 0, (word, got.err)
        doctor = run(
            "doctor", str(wheel), "--sm", "89", "--torch", "2.9", "--python", "3.12", "--platform", word
        )
        assert doctor.code == 0, (word, doctor.out)
    win = run("doctor", "--machine", "--platform", "windows-x86_64", "--python", "3.12", "--sm", "89")
    assert win.code == 0 and "windows (pe)" in win.out and "win32" not in win.out, win.out
    arm = run("doctor", "--machine", "--platform", "linux-aarch64", "--python", "3.12", "--sm", "87")
    assert "GLIBCXX_3.4.24" in arm.out and "the manylinux policy of glibc 2.28" in arm.out, arm.out
    musl = run("doctor", "--machine", "--platform", "musllinux_1_2_x86_64", "--python", "3.12", "--sm", "89")
    assert "musl, no glibc" in musl.out, musl.out
    built = run("matrix", "--platform", "musllinux_1_2_x86_64")
    assert built.code == 2 and "not a platform torch builds CUDA wheels for" in built.err
