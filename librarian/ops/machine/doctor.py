"""doctor: will this wheel run on this machine? One verdict per demand, and the error each failure predicts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from librarian.coords import WheelName, format_dotted, format_version
from librarian.demands import Judgement, Runs, Verdict, Wheel, judge
from librarian.demangle import readable
from librarian.errors import Refused
from librarian.facts import WheelFacts
from librarian.machine import Machine, Probed, format_glibcxx
from librarian.platforms import format_words, os_format
from librarian.probe.torch import with_torch_exports

SCHEMA = 1


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """A wheel judged against a machine: the one judgement, rendered."""

    name: WheelName
    facts: WheelFacts
    machine: Machine
    judgement: Judgement

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """One verdict per demand."""
        return self.judgement.verdicts

    @property
    def runs(self) -> bool | None:
        """False if any demand fails, None if none fails but some are unknown, True if all pass."""
        return {Runs.NO: False, Runs.UNKNOWN: None}.get(self.judgement.runs, True)

    @property
    def partly(self) -> tuple[str, ...]:
        """Members that load but have no code for this GPU (the wheel runs, calls into them fail)."""
        return self.judgement.partly

    @property
    def failures(self) -> tuple[Verdict, ...]:
        """The demands that rule the wheel out."""
        return self.judgement.failures


def diagnose(facts: WheelFacts, machine: Machine, requires_torch: str | None = None) -> DoctorReport:
    """Judge already-read facts (and the wheel's Requires-Dist on torch, where read); reads the installed
    torch's exports only if the wheel needs torch symbols."""
    if any(b.torch_symbols for b in facts.binaries):
        machine = with_torch_exports(machine)
    name = WheelName.parse(facts.filename)
    spec = SpecifierSet(requires_torch) if requires_torch else None
    return DoctorReport(name, facts, machine, judge(Wheel(name, facts, requires_torch=spec), machine))


def doctor(wheel: Path, machine: Machine) -> DoctorReport:
    """Read ``wheel``'s facts from its bytes and judge them against ``machine`` (facts in hand: :func:`diagnose`)."""
    # A crafted zip is refused in one line before zipfile-based readers see it; its directory is read once.
    from librarian.wheel import OpenedWheel  # the readers: doctor --machine never loads them

    opened = OpenedWheel.archive(wheel)
    return diagnose(opened.facts(), machine, opened.info().requires_torch)


_MARKS = {True: "ok", False: "FAIL", None: "?"}


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows
    ]


WIDTH = 120  # columns a row of doctor's table takes at default verbosity; -v shows every cell whole


def _fit(rows: list[tuple[str, ...]], width: int | None) -> list[tuple[str, ...]]:
    """The table's rows with its last three cells (wheel needs, machine has, why) cut so that each row fits
    ``width`` columns (``None``: whole), at a word where it can, ``…`` saying something was cut."""
    if width is None:
        return rows
    fixed = 2 + sum(max(len(r[i]) for r in rows) + 2 for i in range(2))
    room = max(width - fixed - 4, 30)
    has = min(max(len(r[3]) for r in rows), room // 4)
    needs = min(max(len(r[2]) for r in rows), (room - has) // 2)
    why = room - has - needs
    return [(*r[:2], _cut(r[2], needs), _cut(r[3], has), _cut(r[4], why)) for r in rows]


def _cut(text: str, most: int) -> str:
    if len(text) <= most:
        return text
    head = text[: most - 1]
    return (head.rsplit(" ", 1)[0] if " " in head[most // 2 :] else head).rstrip(",; ") + "…"


def render_doctor(report: DoctorReport, width: int | None = WIDTH) -> str:
    """A table, one row per demand (each within ``width`` columns; ``None``: whole), then the errors the
    failures predict (whole)."""
    verdict = {True: "runs here", False: "will NOT run here", None: "may run here (some parts unknown)"}
    rows: list[tuple[str, ...]] = [("demand", "", "wheel needs", "machine has", "why")]
    # A C++ symbol is said as a person reads it (one c++filt run); the predicted error keeps the loader's words.
    cells = readable(x for v in report.verdicts for x in (v.wheel_needs, v.machine_has, v.reason))
    for i, v in enumerate(report.verdicts):
        rows.append((v.demand.title, _MARKS[v.ok], *cells[3 * i : 3 * i + 3]))
    headline = verdict[report.runs]
    serving = report.judgement.serving
    if report.runs is not False and serving is not None:
        headline += f" by {serving}"
    if report.runs is not False and report.partly:
        headline += f", partly ({', '.join(report.partly)} cannot run on this GPU)"
    fitted = _fit(rows, width)
    lines = [f"{report.name}: {headline}", *_table(fitted)]
    # a reason the width cut is never lost: whole, below the table
    lines += [
        f"  {whole[0]}: {whole[4]}"
        for whole, shown in zip(rows[1:], fitted[1:], strict=True)
        if whole[4] != shown[4]
    ]
    for v in report.failures:
        if v.predicted_error:
            lines.append(f"  {v.demand.title}: at run time: {v.predicted_error}")
    return "\n".join(line.rstrip() for line in lines)


def _verdict_json(v: Verdict) -> dict[str, Any]:
    return {
        "demand": v.demand.value,
        "ok": v.ok,
        "wheel_needs": v.wheel_needs,
        "machine_has": v.machine_has,
        "reason": v.reason,
        "predicted_error": v.predicted_error or None,
        "partly": list(v.partly),
        "not_loaded": list(v.not_loaded),
        "exact": v.exact,
    }


def doctor_json(report: DoctorReport) -> dict[str, Any]:
    """The report for ``--json``."""
    serving = report.judgement.serving
    return {
        "schema": SCHEMA,
        "wheel": str(report.name),
        "runs": report.runs,
        "judgement": report.judgement.runs.value,
        "torch_binding": report.judgement.torch_binding,
        "native": report.judgement.native,
        "serving": {"arch": str(serving.arch), "how": serving.kind} if serving else None,
        "loads": list(report.judgement.loads),
        "never_loaded": [{"member": m, "why": why} for m, why in report.judgement.skipped],
        "partly": list(report.partly),
        "verdicts": [_verdict_json(v) for v in report.verdicts],
        "machine": machine_json(report.machine),
    }


def _part(p: Probed[Any], value: Any) -> dict[str, Any]:
    return {"value": value, "source": p.source or None, "reason": p.reason or None}


def machine_json(machine: Machine) -> dict[str, Any]:
    """What was found and how, for ``doctor --machine --json``."""
    gpus = [
        {"index": g.index, "name": g.name, "arch": str(g.arch), "uuid": g.uuid}
        for g in machine.gpus.value or ()
    ]
    torch = machine.torch.value
    torch_value = None
    if torch is not None:
        cuda = format_version(torch.cuda) if torch.cuda else None
        lib_dir = str(torch.lib_dir) if torch.lib_dir else None
        torch_value = {"version": torch.version, "cuda": cuda, "cxx11abi": torch.cxx11abi, "lib_dir": lib_dir}
    v = format_version
    return {
        "schema": SCHEMA,
        "gpus": _part(machine.gpus, gpus or None),
        "selected_gpu": machine.selected,
        "interpreter": _part(machine.interpreter, machine.interpreter.value),
        "python": _part(
            machine.python, format_dotted(machine.python.value) if machine.python.value else None
        ),
        "driver_cuda": _part(
            machine.driver_cuda, v(machine.driver_cuda.value) if machine.driver_cuda.value else None
        ),
        "torch": _part(machine.torch, torch_value),
        "cuda": _part(machine.cuda, v(machine.cuda.value) if machine.cuda.value else None),
        "python_tags": _part(machine.python_tags, [str(t) for t in machine.python_tags.value or ()] or None),
        "glibc": _part(machine.glibc, format_dotted(machine.glibc.value) if machine.glibc.value else None),
        "glibcxx": _part(
            machine.glibcxx, format_glibcxx(machine.glibcxx.value) if machine.glibcxx.value else None
        ),
        "cpu": _part(machine.cpu, machine.cpu.value),
        "os": _part(machine.os, machine.os.value),
    }


def _row(what: str, p: Probed[Any], text: str) -> tuple[str, str, str]:
    return (what, text if p.known else "unknown", f"({p.source})" if p.known else p.reason)


def render_machine(machine: Machine) -> str:
    """What this machine offers and how each part was found (or why it is unknown)."""
    rows: list[tuple[str, ...]] = []
    rows.append(_row("interpreter", machine.interpreter, machine.interpreter.value or ""))
    for g in machine.gpus.value or ():
        mark = " (selected)" if g.index == machine.selected else ""
        uuid = f" {g.uuid}" if g.uuid else ""
        rows.append((f"GPU {g.index}", f"{g.name} {g.arch}{mark}{uuid}", f"({machine.gpus.source})"))
    if not machine.gpus.known:
        rows.append(_row("GPU", machine.gpus, ""))
    d, t, c = machine.driver_cuda, machine.torch, machine.cuda
    rows.append(_row("driver", d, f"CUDA {format_version(d.value)}" if d.value else ""))
    torch_text = ""
    if t.value is not None:
        abi = {True: "cxx11 ABI", False: "pre-cxx11 ABI", None: "ABI unknown"}[t.value.cxx11abi]
        torch_text = f"{t.value.version} ({abi})" + (f" in {t.value.lib_dir}" if t.value.lib_dir else "")
    rows.append(_row("torch", t, torch_text))
    rows.append(_row("torch CUDA", c, format_version(c.value) if c.value else ""))
    tags = machine.python_tags.value or ()
    tags_text = f"{tags[0]} (+{len(tags) - 1} more)" if tags else ""
    rows.append(_row("Python tags", machine.python_tags, tags_text))
    lc, x = machine.glibc, machine.glibcxx
    rows.append(_row("glibc", lc, format_dotted(lc.value) if lc.value else ""))
    rows.append(_row("libstdc++", x, format_glibcxx(x.value) if x.value else ""))
    rows.append(_row("CPU", machine.cpu, machine.cpu.value or ""))
    rows.append(_row("OS", machine.os, os_word(machine.os.value)))
    return "\n".join(line.rstrip() for line in _table(rows))


def os_word(os: str | None) -> str:
    """An OS as the wheel rows name it: ``windows (pe)``, ``linux (elf)``, ``macos (mach-o)``."""
    fmt = os_format(os) if os else None
    words = format_words(fmt) if fmt is not None else None
    return words.name if words is not None else (os or "")


@dataclass(frozen=True, slots=True)
class Checkup:
    """doctor's whole answer: the machine, and each wheel judged against it (no wheels: the machine alone)."""

    machine: Machine
    reports: tuple[DoctorReport, ...]
    show_machine: bool = False  # with wheels, show the machine too (doctor --machine)
    width: int | None = WIDTH  # each table row's columns; None (-v): every cell whole

    @property
    def fails(self) -> bool:
        """Whether a wheel will not run here (exit 1)."""
        return any(r.runs is False for r in self.reports)

    def render(self) -> str:
        """The machine (when asked for, or when there are no wheels), then each wheel's verdicts."""
        machine = [render_machine(self.machine)] if self.show_machine or not self.reports else []
        return "\n\n".join([*machine, *(render_doctor(r, self.width) for r in self.reports)])

    def to_json(self) -> dict[str, Any]:
        """One JSON document: the machine when shown, the wheels when there are any."""
        if not self.reports:
            return {"schema": SCHEMA, "machine": machine_json(self.machine)}
        shown = {"machine": machine_json(self.machine)} if self.show_machine else {}
        return {"schema": SCHEMA, **shown, "wheels": [doctor_json(r) for r in self.reports]}


def checkup(wheels: Sequence[Path], machine: Machine, *, show_machine: bool = False) -> Checkup:
    """Judge each wheel against ``machine`` (none: the checkup shows the machine alone)."""
    return Checkup(machine, tuple(_each(wheels, machine)), show_machine)


def _each(wheels: Sequence[Path], machine: Machine) -> Iterator[DoctorReport]:
    """Each wheel's report; torch's exports, once a wheel has made them read, serve the wheels after it."""
    for path in wheels:
        report = doctor(path, machine)
        machine = report.machine
        yield report


def check_runs(files: Sequence[Path], machine: Machine, *, force: bool = False) -> None:
    """Refuse to install a wheel whose verdicts say it will not run on ``machine`` (unless ``force``)."""
    for path, report in zip(files, _each(files, machine), strict=True):
        if report.runs is False and not force:
            first = report.failures[0]
            raise Refused(f"{path.name}: will not run here ({first}); pass --force to install it anyway")
