"""Which flags go together, as one table the commands read: each command checks its parameters against its
rows before anything is read or downloaded, and a broken row is its one line (exit 2).

A row says that ``flags`` (parameter names; any of them given) need one of ``others`` given too (``needs``),
must not be given with any of them (``not_with``), or that one of ``flags`` must be given (``one_of``).
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
    others: tuple[str, ...]
    why: str


def needs(flags: str, others: str, why: str) -> Rule:
    return Rule("needs", tuple(flags.split()), tuple(others.split()), why)


def not_with(flags: str, others: str, why: str) -> Rule:
    return Rule("not_with", tuple(flags.split()), tuple(others.split()), why)


def one_of(flags: str, why: str) -> Rule:
    return Rule("one_of", tuple(flags.split()), (), why)


# The flags that describe a machine (pull, doctor): --cpu and --os say together what --platform says alone.
_MACHINE = (
    not_with("cpu os", "platform", "--cpu/--os: not with --platform (which says both)"),
    needs("cpu", "os", "--cpu and --os: give both (or --platform TAG)"),
    needs("os", "cpu", "--cpu and --os: give both (or --platform TAG)"),
)

RULES: dict[str, tuple[Rule, ...]] = {
    "pull": (
        *_MACHINE,
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
    "publish": (
        needs("manifest", "stage", "--manifest: goes with --stage (publish --stage --manifest FILE)"),
        one_of("wheels sources", "publish: name wheels (files or URLs), or --from a page or a store"),
        needs("only", "sources", "--only: goes with --from (it picks among a page's or a store's wheels)"),
    ),
    "reindex": (
        not_with("adopt", "manifest", "--adopt: not with --manifest (run 'reindex --adopt' on its own)"),
        not_with("refresh", "manifest", "--refresh: not with --manifest (run 'reindex --refresh' on its own)"),
        not_with("deep", "manifest", "--deep: not with --manifest (run 'reindex --deep' on its own)"),
        needs("refile", "adopt", "--refile: only with --adopt (it files the unindexed wheels adoption reads)"),
        needs("relabel", "adopt", "--relabel: only with --adopt (it files the unindexed wheels adoption reads)"),
        needs("allow_unknown_combo", "manifest adopt", "--allow-unknown-combo: only with --manifest or --adopt"),
    ),
    "plan": (
        one_of("sm sm_from", "plan: pass --sm (e.g. --sm 89, repeatable) or --sm-from store, one of the two"),
        not_with("sm", "sm_from", "plan: pass --sm (e.g. --sm 89, repeatable) or --sm-from store, one of the two"),
    ),
    "gc": (not_with("yes", "dry_run", "gc: --yes and --dry-run: choose one"),),
    "doctor": (
        *_MACHINE,
        not_with("wheels", "env", "--env: judges the installed packages of an environment; not with wheel files"),
    ),
}  # fmt: skip


def given(value: object) -> bool:
    """Whether a parameter was given: anything but its unset default (``None``, ``False``, empty)."""
    return value is not None and value is not False and value != [] and value != () and value != ""


def check(command: str, params: Mapping[str, object]) -> None:
    """BadInput with the line of the first row of ``command`` that ``params`` (its parameters) break."""
    for rule in RULES.get(command, ()):
        said = any(given(params.get(f)) for f in rule.flags)
        other = any(given(params.get(f)) for f in rule.others)
        if (rule.kind == "needs" and said and not other) or (rule.kind == "not_with" and said and other):
            raise BadInput(rule.why)
        if rule.kind == "one_of" and not said:
            raise BadInput(rule.why)
