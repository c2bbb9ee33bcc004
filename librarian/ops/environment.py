"""doctor --env: every installed distribution of an environment that carries native code, judged against the
machine by the one judgement, from the installed files (never importing anything).

A distribution is found by its ``*.dist-info`` in the target's site-packages; its files by its RECORD (each
path must stay inside site-packages); its native members by their names (``.so``, ``.pyd``, ``.dll``,
``.dylib``, ``.so.N``); each is read by the same readers and bounds as a wheel's member, from the file. A
RECORD row whose file is gone or has another size says the distribution was edited or half-installed.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from librarian.errors import LibrarianError
from librarian.facts import BinaryFacts, WheelFacts
from librarian.machine import Machine
from librarian.ops.doctor import DoctorReport, diagnose, doctor_json, render_doctor
from librarian.safeio import input_problem
from librarian.wheel import inspect_path

log = logging.getLogger(__name__)

_NATIVE = re.compile(r"\.(so|pyd|dll|dylib)$|\.so\.\d[\d.]*$")
MAX_RECORD = 64 << 20  # bytes of RECORD read per distribution (torch's is ~2 MB)


@dataclass(frozen=True, slots=True)
class Installed:
    """One installed distribution: its name, version, tag, where it is, its native files, what is off."""

    name: str
    version: str
    tag: str  # from its WHEEL (the first Tag line), else py3-none-any
    site: Path
    native: tuple[str, ...]  # paths relative to ``site``
    problems: tuple[str, ...] = ()  # its RECORD against the files: edited, half-installed, escaping

    @property
    def filename(self) -> str:
        """The wheel it was installed from, as a name the judgement reads its tags from."""
        return f"{self.name.replace('-', '_')}-{self.version}-{self.tag}.whl"


@dataclass(frozen=True, slots=True)
class Judged:
    """One distribution and its judgement (``None``: its files could not be read: ``unread`` says why)."""

    dist: Installed
    report: DoctorReport | None
    unread: str = ""

    @property
    def runs(self) -> bool | None:
        return self.report.runs if self.report is not None else None


def site_dirs(paths: Iterable[str]) -> list[Path]:
    """The site-packages folders of an interpreter's ``sys.path``."""
    return [
        Path(p)
        for p in dict.fromkeys(paths)
        if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
    ]


def read_installed(sites: Sequence[Path]) -> list[Installed]:
    """Every distribution in ``sites`` (one per name: the first site wins, as for imports)."""
    found: dict[str, Installed] = {}
    for site in sites:
        for info in sorted(site.glob("*.dist-info")):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            key = canonicalize_name(name)
            if key in found or not info.is_dir():
                continue
            found[key] = _read_one(site, info, name, version)
    return sorted(found.values(), key=lambda d: canonicalize_name(d.name))


def _read_one(site: Path, info: Path, name: str, version: str) -> Installed:
    tag = _first_tag(info / "WHEEL")
    record = info / "RECORD"
    if not record.is_file():
        return Installed(
            name, version, tag, site, (), ("no RECORD (installed by conda or by hand): not judged",)
        )
    try:
        with record.open("rb") as f:
            text = f.read(MAX_RECORD + 1).decode("utf-8", "replace")
    except OSError as e:
        return Installed(name, version, tag, site, (), (f"RECORD: cannot read ({e.strerror})",))
    if len(text) > MAX_RECORD:
        return Installed(name, version, tag, site, (), (f"RECORD: over {MAX_RECORD} bytes: not judged",))
    native: list[str] = []
    problems: list[str] = []
    root = os.path.realpath(site)
    for row in csv.reader(io.StringIO(text, newline="")):
        if not row or not row[0]:
            continue
        member = row[0]
        if not _NATIVE.search(member):  # only native files are read (torch's RECORD has ~15,000 rows)
            continue
        full = os.path.realpath(os.path.join(site, member))
        if os.path.commonpath([root, full]) != root:  # scripts in bin/ are outside by design; no library
            problems.append(f"{member}: outside site-packages; not read")
            continue
        path = Path(full)
        if not path.exists():
            problems.append(f"{member}: in RECORD but not installed (half-installed?)")
            continue
        if problem := input_problem(path):
            problems.append(f"{member}: {problem}")
            continue
        size = row[2] if len(row) > 2 else ""
        if size.isdigit() and path.stat().st_size != int(size):
            problems.append(f"{member}: {path.stat().st_size} bytes, RECORD says {size} (edited?)")
        native.append(member)
    return Installed(name, version, tag, site, tuple(native), tuple(problems))


def _first_tag(wheel: Path) -> str:
    try:
        for line in wheel.read_text(encoding="utf-8", errors="replace").splitlines()[:50]:
            if line.startswith("Tag:"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "py3-none-any"


def judge_environment(dists: Sequence[Installed], machine: Machine) -> list[Judged]:
    """Each distribution with native files judged against ``machine`` (those without: left out)."""
    judged = []
    for dist in dists:
        if not dist.native:
            if dist.problems:
                judged.append(Judged(dist, None, "; ".join(dist.problems)))
            continue
        try:
            binaries = tuple(b for member in dist.native for b in _read_member(dist.site, member).binaries)
            facts = WheelFacts(dist.filename, binaries)
            judged.append(Judged(dist, diagnose(facts, machine)))
        except LibrarianError as e:
            judged.append(Judged(dist, None, str(e)))
    return judged


def _read_member(site: Path, member: str) -> WheelFacts:
    facts = inspect_path(site / member)
    # Named by its path inside the environment, as a wheel's member is named.
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
        if j.report is None:
            lines.append(f"  {head}: not judged: {j.unread}")
            continue
        r = j.report
        if r.runs is False:
            failing = "; ".join(f"{v.demand.title}: {v.reason or v.wheel_needs}" for v in r.failures)
            lines.append(f"  {head}: will NOT run ({failing})")
            lines += [f"      at run time: {v.predicted_error}" for v in r.failures if v.predicted_error]
        elif r.partly:
            lines.append(f"  {head}: runs, partly ({', '.join(r.partly)} cannot run on this GPU)")
        elif r.runs is None:
            lines.append(f"  {head}: may run (some parts unknown)")
        else:
            lines.append(f"  {head}: runs")
        lines += [f"      {p}" for p in d.problems]
        if verbose:
            lines += ["    " + line for line in render_doctor(r).splitlines()]
    return "\n".join(lines)


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
                "unread": j.unread or None,
                "judgement": doctor_json(j.report) if j.report is not None else None,
            }
            for j in judged
        ],
    }
