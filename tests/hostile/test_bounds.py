"""Every input bounded: flags, settings files, indexes and journals that cost gigabytes or block forever.

Each case is one line naming the input and the problem, exit 2 (3 for a server), no traceback, bounded
time and memory, nothing written. The memory-hungry ones run in a fresh interpreter whose peak RSS is read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.hostile.helpers import assert_one_line, cli_rss

MACHINE = ("--sm", "89", "--torch", "2.9", "--python", "3.11")


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")


@pytest.mark.parametrize(
    ("platform", "says"),
    [
        ("manylinux_2_999999_x86_64", "glibc 2.999999 is no release"),
        ("manylinux_3_17_x86_64", "glibc 3.17 is no release"),
        ("xxxx", "not a platform tag librarian knows"),
        ("linux_", "not a platform tag librarian knows"),
        ("manylinux_2_28_x86_64" + "x" * 100, "not a platform tag"),
    ],
)
def test_item1_a_platform_no_machine_has_is_one_line_at_once(
    tmp_path: Path, wheel: Path, platform: str, says: str
) -> None:
    """manylinux_2_999999 expanded every glibc minor down to the floor: 9 GB in 60 s."""
    for command in (
        ("doctor", str(wheel), *MACHINE),
        ("pull", "tinykern", *MACHINE, "--repo", str(tmp_path)),
    ):
        result, rss, err = cli_rss(*command, "--platform", platform, cwd=tmp_path, timeout=120)
        assert result.returncode == 2, err
        assert_one_line(err, f"--platform {platform[:64]}", says)
        assert rss < 300, rss


def test_item1_real_platforms_still_describe_machines(run: Run, wheel: Path) -> None:
    for platform in ("manylinux_2_28_x86_64", "manylinux2014_aarch64", "linux_x86_64", "win_amd64",
                     "macosx_14_0_arm64", "musllinux_1_2_x86_64"):  # fmt: skip
        result = run("doctor", str(wheel), *MACHINE, "--platform", platform)
        assert result.code in (0, 1), (platform, result.err)


@pytest.mark.parametrize("content", ["deep", "zero"])
def test_item2_a_matrix_override_deep_or_endless_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    """A deeply nested override was a RecursionError traceback; /dev/zero grew to 23 GB."""
    if content == "deep":
        path = tmp_path / "matrix.toml"
        path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
        says = "not valid TOML (nested too deeply)"
    else:
        path, says = Path("/dev/zero"), "a device, not a regular file"
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(path))
    result, rss, err = cli_rss("matrix", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, err
    assert_one_line(err, str(path), says)
    assert rss < 300, rss


@pytest.mark.parametrize("content", ["zero", "big"])
def test_item2_matrix_refresh_from_a_device_or_a_huge_file_is_one_line(tmp_path: Path, content: str) -> None:
    if content == "zero":
        source, says = "/dev/zero", "a device, not a regular file"
    else:
        big = tmp_path / "page.html"
        with open(big, "wb") as f:
            f.truncate(65 << 20)  # sparse: no disk, and past the 64 MiB of any index page
        source, says = str(big), "over the 67108864-byte limit"
    result, rss, err = cli_rss("matrix", "refresh", "--from", source, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, err
    assert_one_line(err, source, says)
    assert rss < 300, rss


def test_item3_an_index_past_the_bound_is_refused_by_its_size_unread(
    run: Run, tmp_path: Path, wheel: Path
) -> None:
    """A 300 MB index.json took 960 MB before it was refused; now its size alone refuses it."""
    assert (
        run("publish", str(wheel), "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--trust-sm").code == 0
    )
    root = tmp_path / "wheelhouse" / "index.json"
    with open(root, "r+b") as f:
        f.truncate(300 << 20)  # sparse: 300 MB of (zero) bytes that would have been read and parsed
    for command in (("ls",), ("pull", "tinykern", *MACHINE, "--platform", "linux_x86_64"), ("verify",)):
        result, rss, err = cli_rss(*command, cwd=tmp_path, timeout=120)
        assert result.returncode == 2, (command, err)
        assert_one_line(err, "index.json", "over the 268435456-byte limit")
        assert rss < 200, (command, rss)


@pytest.mark.parametrize("command", [("inspect",), ("publish", "--torch", "2.9", "--cuda", "12.8"),
                                     ("retag", "--torch", "2.9", "--cuda", "12.8"), ("doctor", *MACHINE)])  # fmt: skip
def test_item4_a_fifo_or_device_as_an_input_wheel_is_refused_by_what_it_is(
    run: Run, tmp_path: Path, command: tuple[str, ...]
) -> None:
    fifo = tmp_path / "x.whl"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO, not a file"), (Path("/dev/zero"), "a device, not a file")):
        result = run(command[0], str(path), *command[1:])
        assert result.code == 2, result.err
        assert_one_line(result.err, str(path), what)
    assert not (tmp_path / "wheelhouse").exists()


def test_item5_a_journal_pointing_outside_names_its_entry_and_reindex_drops_it(
    run: Run, tmp_path: Path, wheel: Path
) -> None:
    """Every change failed with "'..': not a safe path component", naming no file; reindex failed too."""
    assert (
        run("publish", str(wheel), "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--trust-sm").code == 0
    )
    outside = tmp_path / "outside.txt"
    outside.write_text("not the store's")
    journal = tmp_path / "wheelhouse" / ".librarian-journal.json"
    journal.write_text(json.dumps({"add": [], "unlist": [], "delete": ["../outside.txt"]}))
    other = make_wheel(tmp_path / "dist", "tinykern", "0.2.0", "cp311-cp311-linux_x86_64")
    refused = run("publish", str(other), "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--trust-sm")
    assert refused.code == 2
    assert_one_line(refused.err, "wheelhouse/.librarian-journal.json", "'delete' entry '../outside.txt' is outside the store",
                    "'librarian reindex' drops it")  # fmt: skip
    cleared = run("reindex")
    assert cleared.code == 0, cleared.err
    assert "dropped the journal of an interrupted change" in cleared.err
    assert not journal.exists() and outside.read_text() == "not the store's"
    again = run("publish", str(other), "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--trust-sm")
    assert again.code == 0, again.err
    assert run("verify").code == 0


def test_item6_plan_is_linear_in_the_number_of_specs(run: Run, tmp_path: Path, wheel: Path) -> None:
    """3,000 specs took 46 s: every job was scanned once per spec. Measured in this process's CPU time,
    a tenfold count must cost well under the hundredfold a quadratic plan would."""
    assert (
        run("publish", str(wheel), "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--trust-sm").code == 0
    )
    argv = ("--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.11")
    spent = []
    for count in (200, 2000):
        specs = [f"pkg{i}==1.0" for i in range(count)]
        run("plan", *specs, *argv)  # warm: the first plan imports and loads what the second reuses
        start = time.process_time()
        result = run("plan", *specs, *argv)
        spent.append(time.process_time() - start)
        assert result.code == 0, result.err
        assert result.out.count("missing in 1 job(s)") == count
    assert spent[1] < 30 * spent[0], spent


@pytest.mark.parametrize("glibc", ["2.999999", "99999999999.1"])
def test_item1_a_glibc_no_machine_has_is_one_line_at_once(tmp_path: Path, glibc: str) -> None:
    """Found by the flag fuzzer: pull --glibc 2.999999 expanded every glibc minor (49 s of CPU)."""
    command = (
        "pull",
        "tinykern",
        *MACHINE,
        "--platform",
        "linux_x86_64",
        "--repo",
        str(tmp_path),
        "--glibc",
        glibc,
    )
    result, rss, err = cli_rss(*command, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, err
    assert_one_line(err, f"--glibc {glibc}", "is no release a machine runs")
    assert rss < 300, rss


@pytest.mark.parametrize(
    ("text", "says"),
    [("[tool.librarian]\nrepo = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
     ("[tool.librarian]\nrepo = 5\n", "must be a string")],
)  # fmt: skip
def test_settings_files_bent_are_one_line(run: Run, tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    result = run("ls")
    assert result.code == 2
    assert_one_line(result.err, "pyproject.toml", says)
