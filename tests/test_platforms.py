"""Platform tags in one home (librarian/platforms.py and data/platforms.toml): the machine a tag names."""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.errors import BadInput
from librarian.facts import BinaryFormat
from librarian.platforms import (
    _parse_rules,
    canonical_cpu,
    expand_platform,
    legacy_manylinux,
    linux_platforms,
    os_format,
    parse_platform,
    platform_for,
)

ELF, PE, MACHO = BinaryFormat.ELF, BinaryFormat.PE, BinaryFormat.MACHO
ROOT_DATA = Path(__file__).resolve().parent.parent / "librarian" / "data"


@pytest.mark.parametrize(
    ("tag", "cpu", "os", "fmt", "glibc"),
    [
        ("manylinux_2_28_aarch64", "aarch64", "linux", ELF, (2, 28)),
        ("manylinux2014_x86_64", "x86_64", "linux", ELF, (2, 17)),
        ("manylinux1_i686", "i686", "linux", ELF, (2, 5)),
        ("manylinux2010_x86_64", "x86_64", "linux", ELF, (2, 12)),
        ("musllinux_1_2_x86_64", "x86_64", "linux", ELF, None),
        ("linux_armv7l", "armv7l", "linux", ELF, None),
        ("win_amd64", "x86_64", "win32", PE, None),
        ("win_arm64", "aarch64", "win32", PE, None),
        ("win32", "i686", "win32", PE, None),
        ("macosx_11_0_arm64", "aarch64", "darwin", MACHO, None),
        ("macosx_10_9_universal2", "universal2", "darwin", MACHO, None),
        ("any", None, None, None, None),
    ],
)  # fmt: skip
def test_what_a_tag_names(
    tag: str, cpu: str | None, os: str | None, fmt: BinaryFormat | None, glibc: tuple[int, int] | None
) -> None:
    named = parse_platform(tag)
    assert (named.cpu, named.os, named.format, named.glibc) == (cpu, os, fmt, glibc)


def test_legacy_names_and_os_formats_read_both_ways() -> None:
    assert legacy_manylinux((2, 17)) == "manylinux2014" and legacy_manylinux((2, 28)) is None
    assert (os_format("linux"), os_format("win32"), os_format("darwin"), os_format("cygwin")) == (
        ELF,
        PE,
        MACHO,
        PE,
    )
    assert os_format("freebsd") is None


def test_the_table_is_checked_on_load() -> None:
    with pytest.raises(BadInput, match="x.toml: not a platform table"):
        _parse_rules('[os]\nlinux = { os = "linux", format = "coff" }\n[cpu]\n[legacy_manylinux]\n', "x.toml")


@pytest.mark.parametrize(
    ("spelled", "cpu"),
    [("AMD64", "x86_64"), ("x64", "x86_64"), ("arm64", "aarch64"), ("i386", "i686"), ("x86", "i686"),
     ("ppc64le", "ppc64le"), ("sparc", "sparc")],
)  # fmt: skip
def test_one_cpu_vocabulary_read_from_the_table(spelled: str, cpu: str) -> None:
    assert canonical_cpu(spelled) == cpu  # an unknown CPU keeps its own (lowered) name


def test_the_tags_a_linux_machine_takes_start_at_its_cpus_floor() -> None:
    # manylinux_2_5 was defined for x86 only: other CPUs start at manylinux2014's glibc 2.17.
    assert linux_platforms((2, 17), "aarch64") == (
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
        "linux_aarch64",
    )
    x86 = linux_platforms((2, 6), "x86_64")
    assert x86 == ("manylinux_2_6_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64")
    assert expand_platform("manylinux_2_28_x86_64")[:3] == (
        "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
    )  # fmt: skip
    assert expand_platform("win_amd64") == ("win_amd64",)


def test_a_machine_tag_for_a_cpu_its_os_does_not_build_for_is_refused() -> None:
    assert platform_for("windows", "arm64") == "win_arm64"
    with pytest.raises(BadInput, match=r"^--cpu i686: macOS wheels are built for aarch64, x86_64$"):
        platform_for("macos", "i686")


def test_a_platform_table_without_a_manylinux_floor_for_other_cpus_is_refused() -> None:
    text = (ROOT_DATA / "platforms.toml").read_text().replace('other = "2.17"', "")
    with pytest.raises(BadInput, match="not a platform table"):
        _parse_rules(text, "platforms.toml")
