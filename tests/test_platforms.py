"""Platform tags in one home (librarian/platforms.py and data/platforms.toml): the machine a tag names."""

from __future__ import annotations

import pytest

from librarian.errors import BadInput
from librarian.facts import BinaryFormat
from librarian.platforms import _parse_rules, legacy_manylinux, os_format, parse_platform

ELF, PE, MACHO = BinaryFormat.ELF, BinaryFormat.PE, BinaryFormat.MACHO


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
