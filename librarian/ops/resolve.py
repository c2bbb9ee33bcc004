"""Resolution, pure: which stored wheel a machine takes, by the one judgement, and why each other one misses.

``resolve`` takes the machine's wants (``Wants``) and a package's index entries and returns the pick, or the
nearest candidates with every way each misses; ``resolve_pin`` first holds the entries to a PEP 440 pin
(``flash-attn==2.8.3``). ``pull`` fetches what this picks; ``plan`` counts cells with it; ``pull --fix``
chooses replacements with it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from librarian.catalogue import wheel_of
from librarian.coords import GpuArch, MajorMinor, format_cuda, format_version, package_key
from librarian.demands import Cause, Demand, GpuMatch, Judgement, Verdict, judge
from librarian.errors import BadInput
from librarian.index import IndexEntry
from librarian.machine import Machine

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Wants:
    """The machine a pull resolves for: its GPU must be known; its torch line where it has one (a package whose
    stored wheels link no torch is pulled without); the rest is judged as found."""

    machine: Machine
    sm: GpuArch
    torch: MajorMinor | None  # None: no torch there (only wheels that link no torch can be taken)
    cuda: MajorMinor | None  # torch's CUDA line, if known
    tags: tuple[Tag, ...]  # most preferred first, as packaging.tags.sys_tags() orders them

    @classmethod
    def of(cls, machine: Machine) -> Wants:
        """What ``machine`` wants; BadInput naming the flag when its GPU is unknown."""
        gpu_found = machine.gpu
        if gpu_found is None:
            why = machine.gpus.reason or f"no GPU {machine.selected} here; pass --gpu or --sm"
            raise BadInput(f"--sm: {why}")
        torch_info = machine.torch.value
        cuda = machine.cuda.value or (torch_info.cuda if torch_info else None)
        minor = torch_info.minor if torch_info else None
        return cls(machine, gpu_found.arch, minor, cuda, tuple(machine.python_tags.value or ()))

    @property
    def no_torch(self) -> str:
        """Why there is no torch line (``no torch in /venv/bin/python``), naming the target where there is one."""
        where = self.machine.interpreter.value
        return f"no torch in {where}" if where else "no torch installed here"

    def torch_line(self) -> MajorMinor:
        """The torch line, for what needs one (a build); BadInput naming ``--torch`` where there is none."""
        if self.torch is None:
            raise BadInput(f"--torch: {self.no_torch}; pass --torch (e.g. --torch 2.9)")
        return self.torch

    @property
    def driver(self) -> MajorMinor | None:
        """The driver's CUDA version (for PTX JIT), if known."""
        return self.machine.driver_cuda.value

    def describe(self) -> str:
        """``sm89, torch 2.9, cu128, cp312``."""
        cuda = f", cu{format_cuda(self.cuda)}" if self.cuda else ""
        python = self.tags[0].interpreter if self.tags else "?"
        torch = f"torch {format_version(self.torch)}" if self.torch else "no torch"
        return f"sm{self.sm.sm}, {torch}{cuda}, {python}"


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
    def other_platform(self) -> bool:
        """Whether the wheel is for another OS or CPU than the machine's (its judgement fails there)."""
        return any(v.demand in (Demand.OS, Demand.CPU) for v in self.judgement.failures)

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
    elsewhere: tuple[str, ...] = ()  # on a miss: the other platforms its stored wheels are for


@functools.lru_cache(maxsize=8)
def _ranks(tags: tuple[Tag, ...]) -> dict[Tag, int]:
    # ~900 tags for a CPython on Linux: built once per machine, not once per candidate wheel.
    return {tag: i for i, tag in enumerate(tags)}


def _tag_rank(entry: IndexEntry, tags: tuple[Tag, ...]) -> int:
    ranks = _ranks(tags)
    return min((ranks[t] for t in entry.name.tags if t in ranks), default=len(ranks))


def judge_candidate(entry: IndexEntry, wants: Wants) -> Candidate:
    """Pure: one stored wheel's judgement on the machine, every demand, and the ways it misses."""
    wheel = wheel_of(entry)
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
    torch_verdict = judgement.verdict(Demand.TORCH)
    if wants.torch is None and torch_verdict.ok is None:  # it links torch; there is none to load it
        needs = torch_verdict.wheel_needs.split(";")[0]
        blockers.append(f"it links torch ({needs}), and there is {wants.no_torch}; pass --torch")
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
    if v.demand is Demand.TORCH and wants.torch and label.torch != wants.torch:  # the label's, or the path's
        line = f"another torch line: {format_version(label.torch)}, not {format_version(wants.torch)}"
        # a stable build refused below its floor: the import that sets the floor is the news
        return f"{line} ({v.reason})" if v.cause is Cause.BELOW_STABLE_FLOOR else line
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
    if exact:
        return _exact(package, exact, wants)
    alt = best_compatible(candidates, wants)
    if compatible and alt is not None:
        what = f"{alt.entry.filename} (filed under sm{alt.entry.cell.sm.sm})"
        note = f"{package}: no exact match; took {what}, which runs here by {_how(alt, wants)}"
        if alt.other_cuda:
            note += (
                f", built for CUDA {format_version(alt.entry.cell.label.cuda)} (minor-version compatibility)"
            )
        return Resolution(package, alt.entry, note=note)
    # near misses for this machine's OS and CPU first; other platforms' wheels named by their platform
    from librarian.coverage import platform_of  # a miss only: a pull that finds its wheel never loads it

    elsewhere = tuple(sorted({platform_of(c.entry) for c in candidates if c.other_platform}))
    near = _once_per_bytes(
        sorted(candidates, key=lambda c: (c.other_platform, len(c.differences), c.entry.path))
    )
    hint = ""
    if not compatible and alt is not None:
        where = f"{alt.entry.filename} (sm{alt.entry.cell.sm.sm})"
        hint = f"{package}: {where} runs here by {_how(alt, wants)}; pass --compatible to take it"
    return Resolution(package, None, tuple(near[:5]), hint=hint, elsewhere=elsewhere)


def _exact(package: str, exact: list[Candidate], wants: Wants) -> Resolution:
    """The newest of the wheels that fit exactly (within it, the one built for this very torch and CUDA
    line), and what a person should know of the choice."""
    note = ""
    cudas = {c.entry.cell.label.cuda for c in exact}
    if wants.cuda is None and len(cudas) > 1:
        newest = max(cudas)
        listed = ", ".join("cu" + format_cuda(c) for c in sorted(cudas))
        note = f"{package}: several CUDA lines fit ({listed}); took cu{format_cuda(newest)} (pass --cuda to choose)"
        exact = [c for c in exact if c.entry.cell.label.cuda == newest]
    # The newest version; within it, the wheel built for this very torch and CUDA line wins.
    best = max(exact, key=lambda c: (_release(c), not c.other_line, -_tag_rank(c.entry, wants.tags),
                                     *_nearness(c, wants)))  # fmt: skip
    if best.vouched:
        note = "; ".join(filter(None, (note, f"{package}: took {best.entry.filename}, {best.vouched}")))
    if best.other_line:
        label = best.entry.cell.label
        built = f"built for torch {format_version(label.torch)}, cu{format_cuda(label.cuda)}"
        note = "; ".join(
            filter(None, (note, f"{package}: took {best.entry.filename} ({built}): {best.why_this_line()}"))
        )
    elif best.entry.cell.sm != wants.sm:  # filed by hand under fewer GPUs than its code runs on natively
        where = f"took {best.entry.filename}, filed under sm{best.entry.cell.sm.sm}"
        note = "; ".join(filter(None, (note, f"{package}: {where}; it runs here by {_how(best, wants)}")))
    return Resolution(package, best.entry, note=note)


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


@dataclass(frozen=True, slots=True)
class Pin:
    """A package as pull is asked for it: ``flash-attn`` or ``flash-attn==2.8.3`` (any PEP 440 specifier)."""

    name: str  # as written: the package a build on a miss must make
    key: str  # the index's key
    specifier: SpecifierSet


_BARE_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 508's name, the usual pull


def parse_pin(text: str) -> Pin:
    """``NAME`` or ``NAME<specifier>``; BadInput naming the text for anything else (a URL, extras, markers)."""
    if _BARE_NAME.fullmatch(text):  # a bare name: no requirement parser (its grammar costs start-up)
        return Pin(text, package_key(text), SpecifierSet())
    from packaging.requirements import InvalidRequirement, Requirement

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


def _claimed_version(entry: IndexEntry) -> Version:
    """The version a pin is matched against: the wheel's own, with its label; an unlabelled wheel's with the
    label its cell's path claims (``2.8.3+cu128torch2.9``), so a pin names it as it would a labelled one."""
    own = Version(str(entry.name.version))
    return own if own.local else Version(f"{own.public}+{entry.cell.label}")


def resolve_pin(entries: Sequence[IndexEntry], pin: Pin, wants: Wants, compatible: bool) -> Resolution:
    """The newest stored version the pin's specifier admits, resolved for ``wants``: PEP 440's matching, so
    ``==2.8.3`` takes any label of 2.8.3 and ``==2.8.3+cu128torch2.9`` that labelled wheel alone."""
    if not pin.specifier:
        return resolve(entries, pin.key, wants, compatible=compatible, explain=True)
    fit = [e for e in entries if pin.specifier.contains(_claimed_version(e), prereleases=True)]
    if entries and not fit:
        stored = ", ".join(str(v) for v in sorted({Version(e.name.version.public) for e in entries}))
        return Resolution(pin.key, None, note=f"no stored version matches {pin.specifier} (stored: {stored})")
    return resolve(fit, pin.key, wants, compatible=compatible, explain=True)
