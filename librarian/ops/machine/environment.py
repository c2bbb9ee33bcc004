"""doctor --env: every installed distribution of an environment that carries native code, judged against the
machine by the one judgement, from the installed files (never importing anything).

The distributions and their native files are found by :mod:`librarian.probe.installed`; each file is read by
the same readers and bounds as a wheel's member, on forked workers that die with this process. Every name
that came from the disk is printed with its control characters escaped (:func:`librarian.redact.shown`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from librarian.demangle import readable
from librarian.errors import BadInput, LibrarianError
from librarian.facts import BinaryFacts, WheelFacts
from librarian.machine import Machine
from librarian.ops.machine.doctor import DoctorReport, diagnose, doctor_json, render_doctor
from librarian.pool import default_jobs, processes_largest_first
from librarian.probe.installed import Installed, site_dirs
from librarian.probe.torch import with_torch_exports
from librarian.redact import shown
from librarian.wheel import inspect_path, sampled_toolkits

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Judged:
    """One distribution and its judgement (``None``: no native file of it could be read: ``unread`` says so,
    and its problems each file's reason); a file that could not be read is one of its problems."""

    dist: Installed
    report: DoctorReport | None
    unread: str = ""
    not_read: tuple[str, ...] = ()  # native files that could not be read, each with why

    @property
    def runs(self) -> bool | None:
        """Whether it runs; ``None`` where not known (a native file of it could not be read: the loader
        would say its own word on it; torch's own files are not those it installed: import torch may fail)."""
        if self.dist.altered and (self.report is None or self.report.runs is not False):
            return None
        if self.report is None or (self.not_read and self.report.runs is not False):
            return None
        return self.report.runs


def judge_environment(dists: Sequence[Installed], machine: Machine, jobs: int | None = None) -> list[Judged]:
    """Each distribution with native files judged against ``machine`` (those without: left out); the files
    are read on ``jobs`` processes (default: the cores, at most 8), the biggest first."""
    members = [(d.site, m) for d in dists for m in d.native]
    sizes = [_size(site / m) for site, m in members]
    workers = min(jobs or default_jobs(), 8)
    # torch's exports (what an extension's torch symbols are checked against) are read by this process while
    # the others read the files.
    found, exported = processes_largest_first(
        _read_member, members, sizes, workers, lambda: with_torch_exports(machine)
    )
    read = dict(zip(members, found, strict=True))
    machine = exported or machine
    judged = []
    for dist in dists:
        if not dist.native:
            if dist.problems or dist.altered:  # each problem its own line below; the first says what
                judged.append(Judged(dist, None, _first(dist.problems)))
            continue
        found = [read[(dist.site, m)] for m in dist.native]
        unread = tuple(r for r in found if isinstance(r, str))  # each its own line, under the package
        if len(unread) == len(found):
            judged.append(
                Judged(dist, None, f"none of its {len(found)} native file(s) could be read", unread)
            )
            continue
        binaries = tuple(b for facts in found if not isinstance(facts, str) for b in facts.binaries)
        try:
            # torch's own libraries import what they export to one another: it is not asked of itself.
            on = _as_itself(machine) if canonicalize_name(dist.name) == "torch" else machine
            report = diagnose(WheelFacts(dist.filename, binaries), on, dist.requires_torch)
        except LibrarianError as e:
            judged.append(Judged(dist, None, str(e)))
            continue
        if on is machine:  # torch's exports, read for one package, serve the rest
            machine = report.machine
        judged.append(Judged(dist, report, not_read=unread))
    return judged


def _first(problems: tuple[str, ...]) -> str:
    if not problems:
        return "no native files found"
    return problems[0] if len(problems) == 1 else f"{len(problems)} problems"


class _Everything:
    """The exports of torch as its own libraries see them: each other's, every one."""

    def __contains__(self, name: object) -> bool:
        return True


def _as_itself(machine: Machine) -> Machine:
    """``machine`` as torch's own distribution is judged on it: its symbols are its own."""
    torch = machine.torch.value
    if torch is None or torch.exports is None:  # not read from this environment's torch: judged as told
        return machine
    return replace(machine, torch=replace(machine.torch, value=replace(torch, exports=_Everything())))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_member(item: tuple[Path, str]) -> WheelFacts | str:
    """One installed file's facts, named by its path inside the environment (as a wheel's member is named),
    or why it cannot be read (one line)."""
    site, member = item
    try:
        with sampled_toolkits():  # headers, not a cubin per blob: a CUDA torch has 30,000 blobs
            facts = inspect_path(site / member)
    except LibrarianError as e:  # named by its path in the environment, as the other problems are
        return f"{member}: {str(e).removeprefix(f'{Path(member).name}: ')}; not judged"
    return WheelFacts(facts.filename, tuple(_renamed(b, member) for b in facts.binaries))


def _renamed(b: BinaryFacts, member: str) -> BinaryFacts:
    return replace(b, path=member)


def render_environment(judged: Sequence[Judged], where: str, verbose: bool = False) -> str:
    """One line per distribution with native code (runs / runs partly / will NOT run / may run), the
    demand that fails and the error it predicts; ``verbose``: the whole table of each."""
    lines = [f"{where}: {len(judged)} distribution(s) with native code"]
    for j in judged:
        d = j.dist
        head = f"{d.name} {d.version}"
        if d.altered and j.runs is None:  # whatever its libraries say, it may not even import
            again = f"pip install --force-reinstall --no-deps torch=={d.version} puts them back"
            lines.append(f"  {head}: may NOT import: its own files are not those it installed ({again})")
            lines += [f"      {p}" for p in (*d.altered, *j.not_read, *d.problems)]
            continue
        if j.report is None:
            lines.append(f"  {head}: not judged: {j.unread}")
            lines += [f"      {p}" for p in (*j.not_read, *d.problems) if p != j.unread]
            continue
        r = j.report
        if j.not_read and r.runs is not False:
            lines.append(f"  {head}: may run (its readable files run; {len(j.not_read)} could not be read)")
        elif r.runs is False:
            said = readable(v.reason or v.wheel_needs for v in r.failures)  # C++ names demangled
            failing = "; ".join(f"{v.demand.title}: {s}" for v, s in zip(r.failures, said, strict=True))
            lines.append(f"  {head}: will NOT run ({failing})")
            lines += [f"      at run time: {v.predicted_error}" for v in r.failures if v.predicted_error]
        elif r.partly:
            lines.append(f"  {head}: runs, partly ({', '.join(r.partly)} cannot run on this GPU)")
        elif r.runs is None:
            lines.append(f"  {head}: may run (some parts unknown)")
        else:
            lines.append(f"  {head}: runs")
        lines += [f"      {p}" for p in (*j.not_read, *d.problems)]
        if verbose:
            lines += ["    " + line for line in render_doctor(r, None).splitlines()]  # -v: whole
    return "\n".join(shown(line) for line in lines)  # names, members, versions: as the disk has them


def environment_json(judged: Sequence[Judged], where: str) -> dict[str, Any]:
    """``doctor --env --json``."""
    return {
        "schema": 1,
        "environment": where,
        "distributions": [
            {
                "name": j.dist.name,
                "version": j.dist.version,
                "runs": j.runs,
                "partly": list(j.report.partly) if j.report is not None else [],
                "problems": list(j.dist.problems),
                "not_read": list(j.not_read),
                "altered": list(j.dist.altered),
                "unread": j.unread or None,
                "judgement": doctor_json(j.report) if j.report is not None else None,
            }
            for j in judged
        ],
    }


def target_environment(machine: Machine) -> tuple[str, list[Path]]:
    """The target interpreter of ``machine`` and its site-packages (from its ``sys.path``, read by the probe
    that found it); BadInput when it is no Python environment."""
    where = machine.interpreter.value
    if not where:
        raise BadInput(f"--env: {machine.interpreter.reason or 'no target interpreter'}; pass --python PATH")
    sites = site_dirs(machine.search_path.value or ())
    if not sites:
        raise BadInput(f"--env: {where} has no site-packages: not a Python environment")
    return where, sites
