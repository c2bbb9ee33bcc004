"""pull --fix: each installed package that ``doctor --env`` says will not run here (or runs only partly)
replaced by the stored wheel that serves this machine, installed as ``pull --install`` does, and the
environment judged again.

The wheel taken is the installed version's, where the store holds one that serves this machine; else the
newest that does, said per package. A package the store holds nothing for is listed with why and the line
that would make it. Nothing is installed whose judgement fails (``pull --install``'s own check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from librarian.coords import package_key
from librarian.errors import LibrarianError
from librarian.index import IndexEntry
from librarian.layout import Layout
from librarian.machine import Machine
from librarian.ops.machine import environment, installer
from librarian.ops.machine.environment import Judged
from librarian.ops.machine.pull import fetch_checked
from librarian.ops.resolve import Pin, Wants, resolve, resolve_pin
from librarian.ops.store.tree import read_index_or_tree
from librarian.probe import installed
from librarian.stores.base import Store


@dataclass(frozen=True, slots=True)
class Replacement:
    """An installed package that does not run here, the stored wheel that does, and why that one."""

    judged: Judged
    pick: IndexEntry
    why: str


@dataclass(frozen=True, slots=True)
class Unfixable:
    """An installed package that does not run here and that the store has nothing for: why, and how to make it."""

    judged: Judged
    why: str
    make: str


@dataclass(frozen=True, slots=True)
class FixPlan:
    replacements: tuple[Replacement, ...]
    unfixable: tuple[Unfixable, ...]

    def render(self, dry_run: bool) -> str:
        lines = []
        for r in self.replacements:
            d = r.judged.dist
            verb = "would replace" if dry_run else "replace"
            lines.append(f"{verb} {d.name} {d.version} with {r.pick.filename} ({r.why})")
        for u in self.unfixable:
            d = u.judged.dist
            lines.append(f"cannot fix {d.name} {d.version}: {u.why}; make it: {u.make}")
        return "\n".join(lines) if lines else "nothing to fix"


def failing(judged: Sequence[Judged]) -> list[Judged]:
    """The packages that will not run here, or run only partly, and a torch whose own files are not those it
    installed (whatever its libraries' judgement, it may not import)."""
    return [
        j for j in judged if j.dist.altered or (j.report is not None and (j.runs is False or j.report.partly))
    ]


def plan_fix(store: Store, layout: Layout, judged: Sequence[Judged], wants: Wants) -> FixPlan:
    """For each failing package, the stored wheel to put in its place, or why there is none."""
    broken = failing(judged)
    keys = [package_key(j.dist.name) for j in broken]
    wanted = [
        key for j, key in zip(broken, keys, strict=True) if not j.dist.altered
    ]  # torch: not the store's
    index, _ = read_index_or_tree(store, layout, wanted) if wanted else (None, "")
    replacements: list[Replacement] = []
    unfixable: list[Unfixable] = []
    for j, key in zip(broken, keys, strict=True):
        public = _public(j.dist.version)
        if key == "torch" and not j.dist.altered:  # never built nor replaced from a store: torch's own builds
            unfixable.append(_torch_advice(j, wants))
            continue
        if j.dist.altered:  # torch itself: not a store's to replace
            why = "its own files are not those it installed (a file was written over it)"
            unfixable.append(
                Unfixable(j, why, f"pip install --force-reinstall --no-deps torch=={j.dist.version}")
            )
            continue
        entries = index.for_package(key) if index is not None else ()
        make = f"librarian pull {j.dist.name}=={public} --build --publish"
        same = resolve_pin(entries, Pin(j.dist.name, key, SpecifierSet(f"=={public}")), wants, False)
        if same.pick is not None:
            replacements.append(Replacement(j, same.pick, f"the installed version, {public}"))
            continue
        newest = resolve(entries, key, wants)
        if newest.pick is not None:
            why = f"{public} is not stored for this machine; the newest that is: {newest.pick.name.version}"
            replacements.append(Replacement(j, newest.pick, why))
            continue
        if not entries:
            why = f"not in {store.location}"
        else:
            why = "no stored wheel serves this machine" + (f" ({newest.near[0]})" if newest.near else "")
        unfixable.append(Unfixable(j, why, make))
    return FixPlan(tuple(replacements), tuple(unfixable))


def fetch_replacements(store: Store, plan: FixPlan, out: Path) -> list[Path]:
    """The replacement wheels the plan picked, fetched sha256-checked by pull's own fetch into ``out``."""
    return [fetch_checked(store, r.pick, out) for r in plan.replacements]


def _torch_advice(j: Judged, wants: Wants) -> Unfixable:
    """Torch runs only partly (or not) on this GPU: librarian never builds or replaces torch; which of
    PyTorch's own builds of that line has code for this GPU (its arch lists, from the matrix data), and the
    pip line that installs it."""
    from librarian.pytorch.matrix import TORCH_INDEX, load_matrix
    from librarian.pytorch.releases import Platform

    public = _public(j.dist.version)
    why = f"librarian never builds or replaces torch itself (it has no code for {wants.sm} here)"
    try:
        version = Version(public)
    except InvalidVersion:
        return Unfixable(j, why, f"pip install torch with code for {wants.sm} from PyTorch's index")
    line = (version.major, version.minor)
    cpu, windows = wants.machine.cpu.value, (wants.machine.os.value or "").startswith("win")
    platform = (
        Platform.WINDOWS_AMD64
        if windows
        else Platform.LINUX_AARCH64
        if cpu == "aarch64"
        else Platform.LINUX_X86_64
    )
    matrix = load_matrix()
    for cuda in sorted(matrix.cuda_lines_for(line), reverse=True):
        row = matrix.arch_list(cuda, platform, line)
        if row is not None and any(a.major == wants.sm.major and a.minor <= wants.sm.minor for a in row.sass):
            tag = f"cu{cuda[0]}{cuda[1]}"
            why += f"; PyTorch's CUDA {cuda[0]}.{cuda[1]} build of {line[0]}.{line[1]} has code for it"
            return Unfixable(
                j, why, f"pip install --force-reinstall torch=={public} --index-url {TORCH_INDEX}/{tag}"
            )
    return Unfixable(
        j, why + f"; no CUDA build of torch {line[0]}.{line[1]} lists it", "a torch line that does"
    )


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def fix_environment(
    machine: Machine,
    wants: Wants,
    store: Store,
    layout: Layout,
    out: Path,
    show: Callable[[str], None],
    *,
    dry_run: bool,
    force: bool,
) -> bool:
    """``pull --fix``: judge the target environment, replace what will not run with the stored wheels that
    do (installed as pull installs, none whose judgement fails), judge it again; ``show`` is given each
    part as it is known (before, the plan, after). Whether the environment is left with nothing to fix."""
    where, sites = environment.target_environment(machine)
    before = environment.judge_environment(installed.read_installed(sites), machine)
    show("before:\n" + environment.render_environment(failing(before), where))
    plan = plan_fix(store, layout, before, wants)
    show(plan.render(dry_run))
    if (
        dry_run or not plan.replacements
    ):  # a dry run exits as the run would leave it: 1 while any cannot be fixed
        return not plan.unfixable
    fetched = fetch_replacements(store, plan, out)
    installer.check_installable(fetched, machine, force=force)  # a refusal installs nothing
    done: list[str] = []
    for replacement, path in zip(plan.replacements, fetched, strict=True):
        try:  # one package at a time: pip undoes only the package it fails on; the others are said
            installer.install_keeping_torch([path], machine)
        except LibrarianError:
            # pip sets the package's old files aside and puts them back when its install fails: what the
            # environment holds now is said, judged again, before the error.
            still = failing(environment.judge_environment(installed.read_installed(sites), machine))
            show("after (the install failed):\n" + environment.render_environment(still, where))
            if done:
                kept = ", ".join(done)
                show(f"replaced before the failure, and kept (pip undoes only the one it failed on): {kept}")
            raise
        done.append(f"{replacement.judged.dist.name} (now {replacement.pick.filename})")
    broken = failing(environment.judge_environment(installed.read_installed(sites), machine))
    if broken:
        show("after:\n" + environment.render_environment(broken, where))
    else:
        show(f"after:\n{where}: every package with native code runs here")
    return not broken
