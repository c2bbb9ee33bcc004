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
import itertools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from librarian.demangle import readable
from librarian.errors import BadInput, LibrarianError
from librarian.facts import BinaryFacts, WheelFacts
from librarian.machine import Machine
from librarian.ops.doctor import DoctorReport, diagnose, doctor_json, render_doctor
from librarian.ops.installed_names import MAX_RECORD, declared_tops
from librarian.pool import default_jobs, processes_largest_first
from librarian.probe.torch import with_torch_exports
from librarian.safeio import input_problem
from librarian.wheel import inspect_path, sampled_toolkits, torch_requirement

log = logging.getLogger(__name__)

_NATIVE = re.compile(r"\.(so|pyd|dll|dylib)$|\.so\.\d[\d.]*$")
MAX_WALK = 50_000  # files looked at per distribution found without a RECORD
# The CUDA libraries the nvidia-* wheels ship, by their base name (Linux sonames, Windows DLLs).
_CUDA_LIBRARY = re.compile(
    r"^(?:lib)?(cudart|cublasLt|cublas|cudnn[a-z_]*|cufftw?|curand|cusolverMg|cusolver|cusparseLt|cusparse|"
    r"nccl|nvrtc-builtins|nvrtc|nvJitLink|cupti|nvToolsExt|nvjpeg|npp[a-z]*|cufile)"
    r"(?:\.so(?:\.\d+)*|64_\d+(?:_\d+)?\.dll)$"
)


@dataclass(frozen=True, slots=True)
class Installed:
    """One installed distribution: its name, version, tag, where it is, its native files, what is off."""

    name: str
    version: str
    tag: str  # from its WHEEL (the first Tag line), else py3-none-any
    site: Path
    native: tuple[str, ...]  # paths relative to ``site``
    problems: tuple[str, ...] = ()  # its RECORD against the files: edited, half-installed, escaping
    requires_torch: str | None = None  # its METADATA's Requires-Dist on torch

    @property
    def filename(self) -> str:
        """The wheel it was installed from, as a name the judgement reads its tags from."""
        return f"{self.name.replace('-', '_')}-{self.version}-{self.tag}.whl"


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
        would say its own word on it)."""
        if self.report is None or (self.not_read and self.report.runs is not False):
            return None
        return self.report.runs


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
            name, _, version = info.name.removesuffix(".dist-info").rpartition("-")  # no "-" in a version
            key = canonicalize_name(name)
            if key in found or not info.is_dir():
                continue
            found[key] = replace(_read_one(site, info, name, version), requires_torch=_requires_torch(info))
    return second_copies(sorted(found.values(), key=lambda d: canonicalize_name(d.name)))


def _read_one(site: Path, info: Path, name: str, version: str) -> Installed:
    tag = _first_tag(info / "WHEEL")
    record = info / "RECORD"
    if not record.is_file():
        return _without_record(site, info, name, version, tag)
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


def _without_record(site: Path, info: Path, name: str, version: str, tag: str) -> Installed:
    """A distribution with no RECORD (conda, or by hand): its native files found under the top-level names
    it declares (``top_level.txt``) or its own name, said so; symlinks are not followed, the walk bounded."""
    tops, source = declared_tops(info, name)
    root = os.path.realpath(site)
    native: list[str] = []
    seen = 0
    for top in tops:
        folder = site / top
        walked: Iterator[tuple[str, list[str], list[str]]] = (
            os.walk(folder) if folder.is_dir() and not folder.is_symlink() else iter(())
        )
        modules = [p.name for p in site.glob(f"{top}.*") if p.is_file()]  # _foo.cpython-311-....so
        single: tuple[str, list[str], list[str]] = (str(site), [], modules)
        for dirpath, _, files in itertools.chain([single], walked):  # lazily: the bound stops the walk
            for file in files:
                seen += 1
                if seen > MAX_WALK:
                    return Installed(name, version, tag, site, (), (
                        f"no RECORD, and over {MAX_WALK} files under {', '.join(tops)}: not judged",))  # fmt: skip
                full = os.path.join(dirpath, file)
                if not _NATIVE.search(file) or os.path.islink(full) or input_problem(Path(full)):
                    continue
                if os.path.commonpath([root, os.path.realpath(full)]) == root:
                    native.append(os.path.relpath(full, site).replace(os.sep, "/"))
    if not native:
        return Installed(name, version, tag, site, (), (
            f"no RECORD (installed by conda or by hand), and no native files found through {source}: not judged",))  # fmt: skip
    note = f"no RECORD (installed by conda or by hand): its files found through {source}"
    return Installed(name, version, tag, site, tuple(sorted(set(native))), (note,))


def second_copies(dists: Sequence[Installed]) -> list[Installed]:
    """Pure: ``dists`` with a problem line on each package that ships its own copy of a CUDA library an
    ``nvidia-*`` distribution also ships (two copies in one process: which one loads depends on the order)."""
    shipped: dict[str, tuple[str, str]] = {}  # library base -> (nvidia dist, its file)
    for d in dists:
        if canonicalize_name(d.name).startswith("nvidia-"):
            for member in d.native:
                if m := _CUDA_LIBRARY.match(member.rpartition("/")[2]):
                    shipped.setdefault(m[1], (d.name, member))
    out = []
    for d in dists:
        copies: dict[str, list[str]] = {}
        if not canonicalize_name(d.name).startswith("nvidia-"):
            for member in d.native:
                if (m := _CUDA_LIBRARY.match(member.rpartition("/")[2])) and m[1] in shipped:
                    copies.setdefault(m[1], []).append(member)
        extra = []
        for base, members in copies.items():
            owner, theirs = shipped[base]
            more = f" (and {len(members) - 1} more)" if len(members) > 1 else ""
            extra.append(
                f"{members[0]}{more}: a second copy of {base} beside {owner}'s {theirs} (one process loads "
                "one; which depends on the load order)"
            )
        out.append(replace(d, problems=(*d.problems, *extra)) if extra else d)
    return out


def _requires_torch(info: Path) -> str | None:
    """The installed METADATA's Requires-Dist on torch (its headers only, bounded)."""
    from email.parser import BytesHeaderParser

    try:
        with (info / "METADATA").open("rb") as f:
            head = f.read(1 << 20).split(b"\n\n", 1)[0]
    except OSError:
        return None
    headers = BytesHeaderParser().parsebytes(head)
    return torch_requirement([str(v) for v in headers.get_all("Requires-Dist") or ()])


def _first_tag(wheel: Path) -> str:
    try:
        for line in wheel.read_text(encoding="utf-8", errors="replace").splitlines()[:50]:
            if line.startswith("Tag:"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "py3-none-any"


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
            if dist.problems:
                judged.append(Judged(dist, None, "; ".join(dist.problems)))
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
        if j.report is None:
            lines.append(f"  {head}: not judged: {j.unread}")
            lines += [f"      {p}" for p in (*j.not_read, *d.problems)]
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
                "not_read": list(j.not_read),
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
