"""pull: find the exact wheel for a machine in a store, fetch it sha256-checked, optionally install it.

Resolution is pure (``resolve``): the machine's wants against the index's entries. Only the root index
and the asked packages' shards are read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from librarian import progress
from librarian.coords import GpuArch, MajorMinor, format_cuda, format_version, package_key
from librarian.demands import Cause, Demand, GpuMatch, Judgement, Verdict, Wheel, judge
from librarian.errors import BadInput, BadWheel, NotFound, StoreError
from librarian.index import IndexEntry, entry_problems
from librarian.layout import Layout
from librarian.machine import Machine
from librarian.ops.installer import write_requirements
from librarian.ops.tree import read_index_or_tree
from librarian.safeio import atomic_path, sha256_file
from librarian.stores.base import Store
from librarian.wheel import metadata_problems

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Wants:
    """The machine a pull resolves for: its GPU and torch line must be known; the rest is judged as found."""

    machine: Machine
    sm: GpuArch
    torch: MajorMinor
    cuda: MajorMinor | None  # torch's CUDA line, if known
    tags: tuple[Tag, ...]  # most preferred first, as packaging.tags.sys_tags() orders them

    @classmethod
    def of(cls, machine: Machine) -> Wants:
        """What ``machine`` wants; BadInput naming the flag when its GPU or torch is unknown."""
        gpu_found = machine.gpu
        if gpu_found is None:
            why = machine.gpus.reason or f"no GPU {machine.selected} here; pass --gpu or --sm"
            raise BadInput(f"--sm: {why}")
        torch_info = machine.torch.value
        if torch_info is None:
            raise BadInput("--torch: no torch installed here; pass --torch (e.g. --torch 2.8)")
        cuda = machine.cuda.value or torch_info.cuda
        return cls(machine, gpu_found.arch, torch_info.minor, cuda, tuple(machine.python_tags.value or ()))

    @property
    def driver(self) -> MajorMinor | None:
        """The driver's CUDA version (for PTX JIT), if known."""
        return self.machine.driver_cuda.value

    def describe(self) -> str:
        """``sm89, torch 2.9, cu128, cp312``."""
        cuda = f", cu{format_cuda(self.cuda)}" if self.cuda else ""
        python = self.tags[0].interpreter if self.tags else "?"
        return f"sm{self.sm.sm}, torch {format_version(self.torch)}{cuda}, {python}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One stored wheel and its judgement on the machine, with each way it misses.

    ``blockers`` rule it out in every mode (a demand fails: the GPU, torch line, CUDA line, Python, CPU,
    OS, glibc); ``misses`` only in exact mode (the GPU served only by PTX, another CUDA minor that still runs).
    """

    entry: IndexEntry
    judgement: Judgement
    blockers: tuple[str, ...]
    misses: tuple[str, ...]
    filed: tuple[str, ...] = ()  # every cell the same bytes are filed under, where a miss lists it once
    vouched: str = ""  # why its GPU demand was set aside: the publisher vouched for this cell (--trust-sm)

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """One verdict per demand."""
        return self.judgement.verdicts

    @property
    def fit(self) -> GpuMatch | None:
        """How it serves this GPU (its own SASS, compatible SASS, PTX); ``None``: it does not run here."""
        serving = self.judgement.serving
        return serving.match if serving is not None and self.judgement.verdict(Demand.GPU).ok else None

    @property
    def other_cuda(self) -> bool:
        """Built for another CUDA line than torch's, which its bytes still run on (an older minor, say)."""
        return not self.judgement.verdict(Demand.CUDA).exact

    @property
    def other_line(self) -> bool:
        """Built for another torch or CUDA line than this machine's, which its bytes still run on."""
        return self.other_cuda or not self.judgement.verdict(Demand.TORCH).exact

    def why_this_line(self) -> str:
        """Why a wheel built for another line runs on this one: ``does not link torch``, ``stable ABI since 2.9``."""
        reasons = [
            v.reason
            for v in self.judgement.verdicts
            if v.demand in (Demand.TORCH, Demand.CUDA) and not v.exact
        ]
        return "; ".join(r for r in reasons if r)

    @property
    def exact(self) -> bool:
        """Every demand met, natively and on the very CUDA line."""
        return not self.blockers and not self.misses

    @property
    def compatible(self) -> bool:
        """Runs here by NVIDIA's rules and minor-version compatibility, every other demand met."""
        return not self.blockers and self.fit is not None

    @property
    def differences(self) -> tuple[str, ...]:
        """Every way it misses, said plainly."""
        return (*self.misses, *self.blockers)

    def __str__(self) -> str:
        cells = ", ".join(f"sm{sm}" for sm in self.filed or (self.entry.cell.sm.sm,))
        return f"{self.entry.filename} ({cells}): {'; '.join(self.differences)}"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The pick for one package, or the nearest misses when nothing fits."""

    package: str
    pick: IndexEntry | None
    near: tuple[Candidate, ...] = ()
    note: str = ""
    hint: str = ""  # on a miss: a wheel that --compatible would take


@functools.lru_cache(maxsize=8)
def _ranks(tags: tuple[Tag, ...]) -> dict[Tag, int]:
    # ~900 tags for a CPython on Linux: built once per machine, not once per candidate wheel.
    return {tag: i for i, tag in enumerate(tags)}


def _tag_rank(entry: IndexEntry, tags: tuple[Tag, ...]) -> int:
    ranks = _ranks(tags)
    return min((ranks[t] for t in entry.name.tags if t in ranks), default=len(ranks))


def judge_candidate(entry: IndexEntry, wants: Wants) -> Candidate:
    """Pure: one stored wheel's judgement on the machine, every demand, and the ways it misses."""
    wheel = Wheel(entry.name, entry.facts, entry.requires_python_spec, entry.cell.sm)
    judgement = judge(wheel, wants.machine)
    gpu = judgement.verdict(Demand.GPU)
    # A cell filed with --trust-sm is the publisher's word for this GPU, which its bytes do not show: one
    # answer everywhere (ls, the pip pages and plan count it too), and said whenever pull takes it.
    vouched = (
        f"filed under sm{entry.cell.sm.sm} with --trust-sm: the publisher vouched for this GPU, which its "
        f"bytes show no native code for ({gpu.wheel_needs})"
        if "--trust-sm" in entry.overrides
        and entry.cell.sm.number == wants.sm.number
        and (gpu.ok is False or (judgement.serving is not None and not judgement.serving.native))
        else ""
    )
    blockers = [_blocker(v, entry, wants) for v in judgement.failures if not (vouched and v is gpu)]
    misses: list[str] = []
    serving = judgement.serving
    if serving is not None and gpu.ok and not serving.native and not vouched:
        misses.append(f"runs on sm_{wants.sm.sm} only by JIT-compiling its {serving.arch} PTX")
    return Candidate(entry, judgement, tuple(blockers), tuple(misses), vouched=vouched)


def _blocker(v: Verdict, entry: IndexEntry, wants: Wants) -> str:
    """How a failed demand reads in pull's list of near misses."""
    label = entry.cell.label
    if v.demand is Demand.GPU:
        return f"its code does not run on sm_{wants.sm.sm}: {v.reason}"
    if v.demand is Demand.TORCH and entry.name.label is not None and label.torch != wants.torch:
        return f"another torch line: {format_version(label.torch)}, not {format_version(wants.torch)}"
    driver = v.cause is Cause.DRIVER_TOO_OLD  # the driver refuses its runtime: no CUDA line would help
    if v.demand is Demand.CUDA and wants.cuda is not None and label.cuda != wants.cuda and not driver:
        return f"another CUDA line: cu{format_cuda(label.cuda)}, not cu{format_cuda(wants.cuda)}"
    if v.demand is Demand.PYTHON:
        return _python_text(entry, v, wants)
    return f"{v.demand.title}: {v.reason or str(v)}"


def _python_text(entry: IndexEntry, v: Verdict, wants: Wants) -> str:
    if v.cause is Cause.REQUIRES_PYTHON:
        return f"{v.wheel_needs} excludes {v.machine_has}"
    name, mine = entry.name, wants.tags[0] if wants.tags else None
    if v.cause is Cause.OTHER_PYTHON and mine is not None:
        return f"another Python: {name.python_tag}, this interpreter is {mine.interpreter}"
    here = f"{mine.interpreter}-{mine.abi}-{mine.platform}" if mine else "unknown"
    return f"tags {name.tag_text} do not fit this platform ({here})"


def _how(c: Candidate, wants: Wants) -> str:
    serving = c.judgement.serving
    if serving is None:  # it runs here and carries no device code: any GPU serves it
        return "no GPU code of its own (any GPU runs it)"
    unchecked = serving.match is GpuMatch.PTX and wants.driver is None
    return f"{serving}" + (" (driver not checked; pass --driver)" if unchecked else "")


def _release(c: Candidate) -> Version:
    """The version without its local label: ``1.0+cu128torch2.9`` and ``1.0+cu128torch2.10`` are one release."""
    return Version(c.entry.name.version.public)


def _nearness(c: Candidate, wants: Wants) -> tuple[bool, bool, int]:
    """Which copy of the same wheel to take: the one filed for this GPU, else one filed for a GPU whose
    code this one runs (same major, not newer), else the nearest."""
    sm = c.entry.cell.sm
    below = sm.major == wants.sm.major and sm.number <= wants.sm.number
    return sm == wants.sm, below, -abs(sm.number - wants.sm.number)


def best_compatible(candidates: Sequence[Candidate], wants: Wants) -> Candidate | None:
    """Pure: the best wheel that runs here by NVIDIA's rules: SASS over PTX, the same CUDA line, then newest."""
    scored = [c for c in candidates if c.compatible]
    if not scored:
        return None
    top = min((c.fit, c.other_cuda) for c in scored)
    same = [c for c in scored if (c.fit, c.other_cuda) == top]
    # Same match: the newest version, then the arch nearest the GPU, then the best tag.
    return max(same, key=lambda c: (_release(c), c.entry.cell.sm.number, -_tag_rank(c.entry, wants.tags)))


def resolve(
    entries: Sequence[IndexEntry],
    package: str,
    wants: Wants,
    *,
    compatible: bool = False,
    explain: bool = False,
) -> Resolution:
    """Pure: the newest wheel the judgement takes exactly for ``wants``; or the nearest candidates and why they miss.

    The same bytes are often filed in several cells: the copy filed for this very GPU is taken first.
    """
    candidates = [judge_candidate(e, wants) for e in entries]
    for c in candidates if explain else ():  # pull -v: every wheel considered, and why it is passed over
        log.info(
            "%s: %s %s",
            package,
            "fits" if c.exact else "passed over",
            c.entry.path + ("" if c.exact else f" ({'; '.join(c.differences)})"),
        )
    exact = [c for c in candidates if c.exact]
    note = ""
    if exact:
        cudas = {c.entry.cell.label.cuda for c in exact}
        if wants.cuda is None and len(cudas) > 1:
            newest = max(cudas)
            listed = ", ".join("cu" + format_cuda(c) for c in sorted(cudas))
            note = f"{package}: several CUDA lines fit ({listed}); took cu{format_cuda(newest)} (pass --cuda to choose)"
            exact = [c for c in exact if c.entry.cell.label.cuda == newest]
        # The newest version; within it, the wheel built for this very torch and CUDA line wins.
        best = max(
            exact,
            key=lambda c: (
                _release(c),
                not c.other_line,
                -_tag_rank(c.entry, wants.tags),
                *_nearness(c, wants),
            ),
        )
        if best.vouched:
            note = "; ".join(filter(None, (note, f"{package}: took {best.entry.filename}, {best.vouched}")))
        if best.other_line:
            label = best.entry.cell.label
            built = f"built for torch {format_version(label.torch)}, cu{format_cuda(label.cuda)}"
            note = "; ".join(
                filter(
                    None, (note, f"{package}: took {best.entry.filename} ({built}): {best.why_this_line()}")
                )
            )
        elif best.entry.cell.sm != wants.sm:  # filed by hand under fewer GPUs than its code runs on natively
            where = f"took {best.entry.filename}, filed under sm{best.entry.cell.sm.sm}"
            note = "; ".join(filter(None, (note, f"{package}: {where}; it runs here by {_how(best, wants)}")))
        return Resolution(package, best.entry, note=note)
    alt = best_compatible(candidates, wants)
    if compatible and alt is not None:
        what = f"{alt.entry.filename} (filed under sm{alt.entry.cell.sm.sm})"
        note = f"{package}: no exact match; took {what}, which runs here by {_how(alt, wants)}"
        if alt.other_cuda:
            note += (
                f", built for CUDA {format_version(alt.entry.cell.label.cuda)} (minor-version compatibility)"
            )
        return Resolution(package, alt.entry, note=note)
    near = _once_per_bytes(sorted(candidates, key=lambda c: (len(c.differences), c.entry.path)))
    hint = ""
    if not compatible and alt is not None:
        where = f"{alt.entry.filename} (sm{alt.entry.cell.sm.sm})"
        hint = f"{package}: {where} runs here by {_how(alt, wants)}; pass --compatible to take it"
    return Resolution(package, None, tuple(near[:5]), hint=hint)


def check_wheel_identity(path: Path, entry: IndexEntry) -> None:
    """Refuse (BadWheel) a fetched wheel that is not the one its index entry's cell and filename name.

    The sha256 only proves the bytes are the ones the entry points at; an entry of one package may point
    at another's wheel. The entry must agree with itself, and the wheel's METADATA with the entry.
    """
    problems = entry_problems(entry)
    try:
        problems = problems or metadata_problems(path, entry.name)
    except BadWheel as e:
        problems = [str(e).removeprefix(f"{path}: ")]
    if problems:
        raise BadWheel(f"{entry.path}: {problems[0]}; refused")


def _once_per_bytes(candidates: Sequence[Candidate]) -> list[Candidate]:
    """One candidate per stored wheel (sha256 and filename), naming every cell it is filed under: a wheel
    filed for five GPUs is one near miss, not five lines saying the same."""
    first: dict[tuple[str, str], Candidate] = {}
    cells: dict[tuple[str, str], set[GpuArch]] = {}
    for c in candidates:
        key = (c.entry.sha256, c.entry.filename)
        first.setdefault(key, c)
        cells.setdefault(key, set()).add(c.entry.cell.sm)
    return [
        replace(c, filed=tuple(a.sm for a in sorted(cells[k], key=lambda a: a.number)))
        for k, c in first.items()
    ]


def _sha256(path: Path, name: str) -> str:
    with progress.task(f"check {name}", path.stat().st_size) as bar:
        return sha256_file(path, on_chunk=bar.advance)


def _fetch_checked(store: Store, entry: IndexEntry, out_dir: Path) -> Path:
    """Fetch to a temp name, check sha256 against the index, then rename into place.

    A file already in ``out_dir`` with the index's sha256 is kept as it is (nothing is downloaded).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / entry.filename
    if final.is_file() and _sha256(final, entry.filename) == entry.sha256:
        return final
    with atomic_path(final) as partial:  # renamed into place only once checked
        store.fetch(entry.path, partial, entry.sha256)
        if _sha256(partial, entry.filename) != entry.sha256:
            raise StoreError(f"{entry.path}: downloaded bytes do not match the index's sha256; refused")
        check_wheel_identity(partial, entry)  # the bytes are the entry's; are they the wheel it names?
    return final


def pull(
    store: Store,
    default_layout: Layout,
    packages: Sequence[str],
    wants: Wants,
    out_dir: Path,
    *,
    compatible: bool = False,
    requirements: Path | None = None,
) -> PullReport:
    """Resolve every package and fetch the picks; raises NotFound (exit 1) if any package has no fit.

    With ``requirements``, nothing is downloaded: the picks are written there as hash-pinned direct
    references (``name @ URL --hash=sha256:...``) that plain pip and uv install from, and that path returned.
    """
    if not packages:
        raise BadInput("pull: name at least one package")
    if requirements is not None and requirements.is_dir():  # said before the store is read
        raise BadInput(f"{requirements}: is a directory; --requirements names the file to write")
    pins = [parse_pin(p) for p in packages]
    index, listed = read_index_or_tree(store, default_layout, [pin.key for pin in pins])
    resolutions = [resolve_pin(index.for_package(pin.key), pin, wants, compatible) for pin in pins]
    if listed:  # no index.json: the tree was listed instead; say so once, with the first package
        resolutions[0] = replace(resolutions[0], note="; ".join(filter(None, (listed, resolutions[0].note))))
    missing = [r for r in resolutions if r.pick is None]
    if missing:
        raise NoMatch(store.location, wants, tuple(missing))
    picks = [r.pick for r in resolutions if r.pick is not None]
    if requirements is not None:
        write_requirements(requirements, [(e, store.url_for(e.path)) for e in picks])
        return PullReport(store.location, wants, tuple(resolutions), (requirements,), requirements)
    files = [_fetch_checked(store, e, out_dir) for e in picks]
    for e, f in zip(picks, files, strict=True):
        log.info("took %s -> %s (sha256 %s checked)", e.path, f, e.sha256[:12])
    return PullReport(store.location, wants, tuple(resolutions), tuple(files))


@dataclass(frozen=True, slots=True)
class Pin:
    """A package as pull is asked for it: ``flash-attn`` or ``flash-attn==2.8.3`` (any PEP 440 specifier)."""

    name: str  # as written: the package a build on a miss must make
    key: str  # the index's key
    specifier: SpecifierSet


def parse_pin(text: str) -> Pin:
    """``NAME`` or ``NAME<specifier>``; BadInput naming the text for anything else (a URL, extras, markers)."""
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        raise BadInput(f"{text}: not a package name or NAME==VERSION (a PEP 440 specifier)") from e
    if req.url or req.extras or req.marker:
        raise BadInput(
            f"{text}: name a package, with a version specifier at most (no URL, extras or markers)"
        )
    return Pin(req.name, package_key(req.name), req.specifier)


def pin_key(text: str) -> str:
    """The index key of a package as pull is asked for it."""
    return parse_pin(text).key


def resolve_pin(entries: Sequence[IndexEntry], pin: Pin, wants: Wants, compatible: bool) -> Resolution:
    """The newest stored version the pin's specifier admits (local labels aside), resolved for ``wants``."""
    if not pin.specifier:
        return resolve(entries, pin.key, wants, compatible=compatible, explain=True)
    fit = [e for e in entries if pin.specifier.contains(Version(e.name.version.public), prereleases=True)]
    if entries and not fit:
        stored = ", ".join(str(v) for v in sorted({Version(e.name.version.public) for e in entries}))
        return Resolution(pin.key, None, note=f"no stored version matches {pin.specifier} (stored: {stored})")
    return resolve(fit, pin.key, wants, compatible=compatible, explain=True)


@dataclass(frozen=True, slots=True)
class PullReport:
    """What pull chose for each package and where it put it (or the requirements file it wrote)."""

    location: str
    wants: Wants
    resolutions: tuple[Resolution, ...]
    files: tuple[Path, ...]  # one per resolution; the requirements file alone with ``requirements``
    requirements: Path | None = None

    @property
    def notes(self) -> tuple[str, ...]:
        """What the resolver wants said (several CUDA lines fit, a compatible pick, a listed tree)."""
        return tuple(r.note for r in self.resolutions if r.note)

    def render(self) -> str:
        """``store path -> file`` per wheel, or where the requirements file is and how to use it."""
        if self.requirements is not None:
            n = len(self.resolutions)
            return f"wrote {self.requirements} ({n} wheel(s)); install with: pip install --force-reinstall --no-deps -r {self.requirements.absolute()}"
        return "\n".join(
            f"{r.pick.path} -> {f}"
            for r, f in zip(self.resolutions, self.files, strict=False)
            if r.pick is not None
        )

    def to_json(self) -> dict[str, Any]:
        """The picks for ``--json``."""
        files = self.files if self.requirements is None else (self.requirements,) * len(self.resolutions)
        return {
            "schema": 1,
            "repo": self.location,
            "wants": self.wants.describe(),
            "requirements": str(self.requirements) if self.requirements else None,
            "wheels": [
                {"package": r.package, "path": r.pick.path if r.pick else None, "file": str(f)}
                for r, f in zip(self.resolutions, files, strict=False)
            ],
        }


class NoMatch(NotFound):
    """No stored wheel fits; carries the near candidates for the message."""

    def __init__(self, location: str, wants: Wants, misses: tuple[Resolution, ...]) -> None:
        self.wants = wants
        self.misses = misses
        names = ", ".join(r.package for r in misses)
        super().__init__(f"{names}: no wheel in {location} for {wants.describe()}")

    def details(self) -> list[str]:
        """The lines that explain each miss (the CLI prints them after the error line)."""
        lines = []
        for r in self.misses:
            if not r.near and not r.note:
                lines.append(f"  {r.package}: not in the store at all")
            for near in r.near:
                lines.append(f"  {near}")
            lines.extend(f"  {what}: {text}" for what, text in (("note", r.note), ("hint", r.hint)) if text)
        return lines

    def data(self) -> dict[str, object]:
        """For ``--json``: each near candidate, the demands its judgement fails, and every way it misses."""
        return {
            "candidates": [
                {
                    "package": r.package,
                    "path": c.entry.path,
                    "cells": [f"sm{sm}" for sm in c.filed or (c.entry.cell.sm.sm,)],
                    "fails": [v.demand.value for v in c.judgement.failures],
                    "differences": list(c.differences),
                }
                for r in self.misses
                for c in r.near
            ]
        }
