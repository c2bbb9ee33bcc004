"""Platform tags, in one home: the machine a tag names (CPU, OS and its binary format, glibc floor).

Every reader of a platform tag asks :func:`parse_platform`: the CPU, OS and glibc demands (what a wheel's
tag claims), and ``--platform`` (the machine a flag describes). The rules are data,
``librarian/data/platforms.toml``, checked on load. Pure.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from packaging.tags import mac_platforms

from librarian.compat import tomllib
from librarian.coords import MajorMinor
from librarian.errors import BadInput
from librarian.facts import BinaryFormat, WheelFacts

UNIVERSAL2 = "universal2"  # a macOS fat binary: x86_64 and arm64 in one file


@dataclass(frozen=True, slots=True)
class PlatformTag:
    """What one platform tag says of the machine it is for (``None``: the tag does not say)."""

    tag: str
    cpu: str | None
    os: str | None  # "linux", "win32", "darwin"
    format: BinaryFormat | None  # the binary format that OS loads
    glibc: MajorMinor | None = None  # the glibc a manylinux tag promises (and a machine it names has)


@dataclass(frozen=True, slots=True)
class FormatWords:
    """How one binary format is named and refused: ``linux (elf)``, ``an ELF``, its OS loader's error, and
    whether that OS has a CUDA driver at all."""

    name: str  # inspect's OS row: "linux (elf)"
    label: str  # the format: "Mach-O"
    a: str  # one file of it, in a sentence: "a Mach-O"
    os: str  # the OS that loads it: "macOS"
    loader_error: str  # what that OS's loader says of a file of another format
    cuda: bool  # whether that OS has a CUDA driver


@dataclass(frozen=True, slots=True)
class _Rules:
    formats: dict[BinaryFormat, FormatWords]
    os: dict[str, tuple[str, BinaryFormat]]
    cpu: dict[str, str]
    legacy: dict[str, MajorMinor]
    manylinux_floor: dict[str, MajorMinor]  # by CPU; "other" for the rest
    os_words: dict[str, str]  # --os -> the OS
    machine_tags: dict[str, dict[str, str]]  # OS -> CPU -> the tag its machines install
    linux_glibc: MajorMinor  # the glibc a --os linux machine is taken to have
    glibcxx: dict[MajorMinor, tuple[int, ...]]  # manylinux glibc floor -> the GLIBCXX its policy promises
    baseline: dict[str, tuple[int, ...]]  # CPU -> the GLIBC version every glibc of it defines


def _version(text: object) -> MajorMinor:
    major, minor = (int(x) for x in str(text).split("."))
    return major, minor


def _parse_rules(text: str, source: str) -> _Rules:
    try:
        data: dict[str, Any] = tomllib.loads(text)
        formats = {
            BinaryFormat(k): FormatWords(
                str(v["name"]),
                str(v["label"]),
                str(v["a"]),
                str(v["os"]),
                str(v["loader_error"]),
                bool(v["cuda"]),
            )
            for k, v in data["formats"].items()
        }
        oses = {k: (str(v["os"]), BinaryFormat(v["format"])) for k, v in data["os"].items()}
        cpus = {str(k): str(v) for k, v in data["cpu"].items()}
        legacy = {str(name): _version(v) for name, v in data["legacy_manylinux"].items()}
        floor = {str(cpu): _version(v) for cpu, v in data["manylinux_floor"].items()}
        words = {str(k): str(v) for k, v in data["os_words"].items()}
        tags = dict(data["machine_tags"])
        linux_glibc = _version(tags.pop("linux_glibc"))
        machine_tags = {str(os): {str(c): str(t) for c, t in v.items()} for os, v in tags.items()}
        glibcxx = {
            _version(k): tuple(int(x) for x in str(v).split("."))
            for k, v in data["manylinux_glibcxx"].items()
        }
        baseline = {
            str(c): tuple(int(x) for x in str(v).split(".")) for c, v in data["glibc_baseline"].items()
        }
        if "other" not in floor or not set(words.values()) <= {name for name, _ in oses.values()}:
            raise ValueError("manylinux_floor needs 'other'; os_words must name OSes of [os]")
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{source}: not a platform table ({e})") from e
    return _Rules(formats, oses, cpus, legacy, floor, words, machine_tags, linux_glibc, glibcxx, baseline)


@functools.cache
def _rules() -> _Rules:
    text = resources.files("librarian").joinpath("data/platforms.toml").read_text(encoding="utf-8")
    return _parse_rules(text, "librarian/data/platforms.toml")


def platform_tag_of(text: str, glibc: MajorMinor | None = None) -> str:
    """``--platform``'s one parse, from either vocabulary: a machine's name as PyTorch and ``ls`` print it
    (``linux-x86_64``, ``linux-aarch64``, ``windows-x86_64``, ``macos-arm64``) is that OS and CPU, a Linux one
    at the glibc PyTorch builds for (2.28) unless ``glibc`` says otherwise, so it takes every manylinux wheel
    such a machine's pip takes; a wheel tag (``manylinux_2_28_x86_64``, ``linux_x86_64``) means exactly that."""
    word = text.strip()
    if "-" in word and not word.startswith("-"):
        os_word, _, cpu = word.lower().partition("-")
        return platform_for(os_word, cpu, glibc)
    return word


@functools.lru_cache(maxsize=512)
def parse_platform(tag: str) -> PlatformTag:
    """``manylinux_2_28_aarch64`` -> aarch64, linux (ELF), glibc 2.28; ``win_amd64`` -> x86_64, win32 (PE);
    ``macosx_11_0_universal2`` -> universal2, darwin (Mach-O); ``any`` -> nothing."""
    rules = _rules()
    if tag == "any":
        return PlatformTag(tag, None, None, None)
    cpu = rules.cpu.get(tag) if tag in rules.os else None  # a whole tag that is a CPU too: win32
    if cpu is None:
        cpu = next(
            (
                c
                for suffix, c in sorted(rules.cpu.items(), key=lambda kv: -len(kv[0]))
                if tag.endswith(suffix)
            ),
            None,
        )
    prefix = tag.split("_")[0]
    os_format = rules.os.get(prefix)
    glibc: MajorMinor | None = None
    if m := re.fullmatch(r"manylinux_(\d+)_(\d+)_.+", tag):
        glibc = (int(m[1]), int(m[2]))
    elif prefix in rules.legacy:
        glibc = rules.legacy[prefix]
    return PlatformTag(
        tag, cpu, os_format[0] if os_format else None, os_format[1] if os_format else None, glibc
    )


# The version numbers a platform tag may carry: glibc 2.0 to 2.99 (2.42 is the newest release as of this
# writing), musl 1.x, macOS 10 to 99. Past them a tag names no machine, and expanding it (every glibc minor
# down to the floor) would cost without bound: manylinux_2_999999 took 9 GB.
_VERSIONED = re.compile(r"(manylinux|musllinux|macosx)_(\d+)_(\d+)_(.+)")
_MAX_VERSION = {"manylinux": (2, 99), "musllinux": (1, 99), "macosx": (99, 99)}
_WHAT = {"manylinux": "glibc", "musllinux": "musl", "macosx": "macOS"}


def check_platform(tag: str) -> PlatformTag:
    """A ``--platform`` tag the machine it names exists for; BadInput naming the tag otherwise."""
    example = "manylinux_2_28_x86_64, linux_aarch64, win_amd64 or macosx_14_0_arm64"
    if len(tag) > 64 or not re.fullmatch(r"[a-z0-9_]+", tag):
        raise BadInput(f"--platform {tag[:64]}: not a platform tag (e.g. {example})")
    named = parse_platform(tag)
    if named.os is None or named.cpu is None or tag.split("_")[0] not in _rules().os:
        raise BadInput(f"--platform {tag}: not a platform tag librarian knows (e.g. {example})")
    if m := _VERSIONED.fullmatch(tag):
        major, minor = int(m[2]), int(m[3])
        if not is_release(m[1], (major, minor)):
            raise BadInput(f"--platform {tag}: {_WHAT[m[1]]} {major}.{minor} is no release a machine runs")
    return named


def glibc_baseline(cpu: str | None) -> tuple[int, ...] | None:
    """The GLIBC version every glibc for ``cpu`` defines (x86_64: 2.2.5), ``None`` for a CPU not listed."""
    return _rules().baseline.get(canonical_cpu(cpu)) if cpu else None


def policy_glibcxx(glibc: MajorMinor) -> tuple[int, ...] | None:
    """The libstdc++ (``GLIBCXX`` version) a manylinux machine of glibc ``glibc`` is promised by its policy;
    ``None`` below the first policy."""
    rows = [(floor, v) for floor, v in _rules().glibcxx.items() if floor <= glibc]
    return max(rows)[1] if rows else None


def is_release(kind: str, version: MajorMinor) -> bool:
    """Whether a ``manylinux`` (glibc), ``musllinux`` (musl) or ``macosx`` version is one a machine can run:
    past the bounds a version names no machine, and expanding its tags would cost without bound."""
    top = _MAX_VERSION[kind]
    if kind != "macosx" and version[0] != top[0]:
        return False
    return version[0] <= top[0] and version[1] <= top[1]


def legacy_manylinux(glibc: MajorMinor) -> str | None:
    """The pre-PEP-600 name of a manylinux glibc floor: (2, 17) -> ``manylinux2014``."""
    return next((name for name, version in _rules().legacy.items() if version == glibc), None)


def format_words(fmt: BinaryFormat) -> FormatWords | None:
    """How a native binary format is named and refused (``None``: not a native format, e.g. a cubin)."""
    return _rules().formats.get(fmt)


def os_format(os: str) -> BinaryFormat | None:
    """The binary format an OS (``sys.platform``'s name: linux, win32, darwin) loads; None: not one we know."""
    return next((fmt for name, fmt in _rules().os.values() if name == os), None)


def canonical_facts(facts: WheelFacts) -> WheelFacts:
    """Facts with every member's CPU in the one vocabulary: an index written before the PE and Mach-O
    readers spoke it says ``arm64``; read, it says ``aarch64`` as the bytes now do."""
    if all(b.cpu is None or canonical_cpu(b.cpu) == b.cpu for b in facts.binaries):
        return facts
    binaries = tuple(replace(b, cpu=canonical_cpu(b.cpu)) if b.cpu else b for b in facts.binaries)
    return replace(facts, binaries=binaries)


def canonical_cpu(name: str) -> str:
    """A CPU name in librarian's one vocabulary: ``AMD64`` -> ``x86_64``, ``arm64`` -> ``aarch64``."""
    lowered = name.strip().lower()
    return _rules().cpu.get(lowered, lowered)


def platform_for(os: str, cpu: str, glibc: MajorMinor | None = None) -> str:
    """The platform tag ``--os`` and ``--cpu`` mean: linux + aarch64 -> ``manylinux_2_28_aarch64`` (glibc
    2.28 unless given), windows + x86_64 -> ``win_amd64``, macos + arm64 -> ``macosx_11_0_arm64``."""
    rules = _rules()
    name = rules.os_words.get(os.strip().lower())
    known = set(rules.cpu.values()) - {UNIVERSAL2}
    canonical = rules.cpu.get(cpu.strip().lower())
    if name is None:
        raise BadInput(f"--os {os}: expected linux, windows or macos")
    if canonical is None or canonical not in known:
        raise BadInput(f"--cpu {cpu}: expected one of {', '.join(sorted(known))}")
    if (tags := rules.machine_tags.get(name)) is not None:
        if canonical not in tags:
            which = "Windows" if name == "win32" else "macOS"
            raise BadInput(f"--cpu {cpu}: {which} wheels are built for {', '.join(sorted(tags))}")
        return tags[canonical]
    major, minor = glibc or rules.linux_glibc
    return f"manylinux_{major}_{minor}_{canonical}"


def linux_platforms(glibc: MajorMinor | None, cpu: str) -> tuple[str, ...]:
    """The platform tags a Linux machine with this glibc accepts, best first (as pip orders them)."""
    platforms: list[str] = []
    floors = _rules().manylinux_floor
    floor = floors.get(cpu, floors["other"])
    if glibc is not None and glibc[0] == floor[0]:
        for minor in range(glibc[1], floor[1] - 1, -1):
            platforms.append(f"manylinux_{glibc[0]}_{minor}_{cpu}")
            if legacy := legacy_manylinux((glibc[0], minor)):
                platforms.append(f"{legacy}_{cpu}")
    platforms.append(f"linux_{cpu}")
    return tuple(platforms)


def expand_platform(tag: str) -> tuple[str, ...]:
    """A ``--platform`` tag and the older ones it implies, as the installer's own tags say: a
    ``manylinux_2_28_x86_64`` machine takes 2_17 wheels too; a ``macosx_14_0_arm64`` one takes
    ``macosx_11_0_arm64`` and ``universal2`` wheels (packaging's ``mac_platforms``, which pip uses)."""
    m = _VERSIONED.fullmatch(tag)
    if m and m[1] == "macosx":
        return tuple(mac_platforms((int(m[2]), int(m[3])), m[4]))
    if m and m[1] == "musllinux":
        return tuple(f"musllinux_{m[2]}_{minor}_{m[4]}" for minor in range(int(m[3]), -1, -1))
    named = parse_platform(tag)
    if not tag.startswith("manylinux_") or named.glibc is None:
        return (tag,)
    return linux_platforms(named.glibc, tag.split("_", 3)[3])  # the CPU as the tag spells it
