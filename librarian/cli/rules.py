"""Which flags go together, as one table the commands read: each command checks its parameters against its
rows before anything is read or downloaded, and a broken row is its one line (exit 2).

A row says that ``flags`` (parameter names; any of them given) need ``other`` given too (``needs``), must
not be given with it (``not_with``), or that one of ``flags`` must be given (``one_of``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from librarian.errors import BadInput

_BUILD_ONLY = ("source", "publish", "keep", "repair", "compile_cache", "no_cache")


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: its kind (``needs``, ``not_with``, ``one_of``), the flags it is about, the other flag, and
    the line said when it is broken."""

    kind: str
    flags: tuple[str, ...]
    other: str
    why: str


def needs(flags: str, other: str, why: str) -> Rule:
    return Rule("needs", tuple(flags.split()), other, why)


def not_with(flags: str, other: str, why: str) -> Rule:
    return Rule("not_with", tuple(flags.split()), other, why)


def one_of(flags: str, why: str) -> Rule:
    return Rule("one_of", tuple(flags.split()), "", why)


RULES: dict[str, tuple[Rule, ...]] = {
    "pull": (
        needs("dry_run", "fix", "--dry-run goes with --fix (pull --fix --dry-run)"),
        not_with("packages build requirements", "fix",
                 "--fix: replaces what the target environment needs; not with PACKAGE, --build or --requirements"),
        one_of("packages fix", "pull: name at least one package, or pass --fix"),
        not_with("install", "requirements",
                 "--install and --requirements: choose one (the file is for installing without librarian)"),
        needs(" ".join(_BUILD_ONLY), "build",
              "--source, --publish, --keep, --repair, --cache and --no-cache go with --build (pull --build "
              "builds on a miss)"),
        needs("create", "publish", "--create: goes with --build --publish (the store the build is filed in)"),
        not_with("build", "requirements",
                 "--build and --requirements: the file names stored wheels; build first, then write it"),
        not_with("compile_cache", "no_cache", "--cache and --no-cache: choose one"),
    ),
    "build": (
        needs("manifest", "stage", "--manifest: goes with --stage (build --stage --manifest FILE)"),
        not_with("stage repo", "out", "-o: writes the wheel to a folder; not with --repo or --stage"),
        not_with("torch cuda python sm glibc", "job",
                 "--job: the job says torch, CUDA, Python, cells and glibc; not with "
                 "--torch/--cuda/--python/--sm/--glibc"),
        not_with("compile_cache", "no_cache", "--cache and --no-cache: choose one"),
    ),
    "doctor": (
        not_with("wheels", "env", "--env: judges the installed packages of an environment; not with wheel files"),
    ),
}  # fmt: skip


def given(value: object) -> bool:
    """Whether a parameter was given: anything but its unset default (``None``, ``False``, empty)."""
    return value is not None and value is not False and value != [] and value != () and value != ""


def check(command: str, params: Mapping[str, object]) -> None:
    """BadInput with the line of the first row of ``command`` that ``params`` (its parameters) break."""
    for rule in RULES.get(command, ()):
        said = [f for f in rule.flags if given(params.get(f))]
        if rule.kind == "needs" and said and not given(params.get(rule.other)):
            raise BadInput(rule.why)
        if rule.kind == "not_with" and said and given(params.get(rule.other)):
            raise BadInput(rule.why)
        if rule.kind == "one_of" and not said:
            raise BadInput(rule.why)
