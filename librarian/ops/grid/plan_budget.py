"""How long plan's jobs will take, and jobs cut to fit a budget (a GitHub-hosted job stops at 6 h). Pure.

Each cell's estimate: the seconds per GPU arch of the package's recorded builds (the build records in its
index entries) of the same combo, else of the package's other combos, else :data:`DEFAULT_PER_ARCH`; a job
adds :data:`SETUP` (its environment and torch). ``--budget`` cuts a job whose estimate is past it into jobs of
the same combo (each installs torch once), oldest GPUs first, each within the budget; a cell that alone is past
it is refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from librarian.coords import format_version
from librarian.errors import BadInput
from librarian.index import IndexEntry
from librarian.ops.build.build_request import BuildRequest

DEFAULT_PER_ARCH = 1200  # seconds a GPU arch's compile is taken to take with nothing recorded (20 min)
SETUP = 300  # seconds a job spends before compiling: its environment, torch, the build tools
_BUDGET = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True, slots=True)
class Estimate:
    """A job's estimated seconds and what they rest on (``recorded``, ``package``, ``default``)."""

    seconds: int
    basis: str


def parse_budget(text: str) -> int:
    """``5h30m``, ``90m``, ``3600s`` or a number of seconds: seconds; BadInput otherwise."""
    value = text.strip().lower()
    if value.isdigit() and int(value) > 0:
        return int(value)
    found = _BUDGET.match(value)
    if not value or found is None or not any(found.groups()):
        raise BadInput(f"--budget {text}: a duration such as 5h30m, 90m or 3600s")
    h, m, s = (int(g or 0) for g in found.groups())
    seconds = h * 3600 + m * 60 + s
    if seconds <= 0:
        raise BadInput(f"--budget {text}: must be more than nothing")
    return seconds


def _combo_key(package: str, torch: str, cuda: str, python: str, platform: str) -> tuple[str, ...]:
    return (package, torch, cuda, python, platform)


@dataclass(frozen=True, slots=True)
class Rates:
    """Seconds per GPU arch of recorded builds: by (package, combo) and by package."""

    by_combo: dict[tuple[str, ...], float]
    by_package: dict[str, float]

    @classmethod
    def of(cls, entries: Iterable[IndexEntry]) -> Rates:
        """From the build records in index entries (one build filed under several cells counted once)."""
        combo: dict[tuple[str, ...], list[float]] = {}
        package: dict[str, list[float]] = {}
        seen: set[tuple[str, str]] = set()
        for e in entries:
            record = e.build
            if record is None or (e.sha256, record.date) in seen:
                continue
            seen.add((e.sha256, record.date))
            rate = record.seconds / max(1, record.archs)
            name = e.name
            tag = next(iter(sorted(str(t.interpreter) for t in name.tags)), "")
            key = _combo_key(e.cell.package, format_version(e.cell.label.torch), format_version(e.cell.label.cuda),
                             tag, "")  # fmt: skip
            combo.setdefault(key, []).append(rate)
            package.setdefault(e.cell.package, []).append(rate)
        return cls(
            {k: sum(v) / len(v) for k, v in combo.items()}, {k: sum(v) / len(v) for k, v in package.items()}
        )

    def per_arch(self, job: BuildRequest) -> tuple[float, str]:
        c = job.combo
        package = (job.package or "").replace("-", "_")
        key = _combo_key(package, format_version(c.torch), format_version(c.cuda), str(c.python), "")
        if key in self.by_combo:
            return self.by_combo[key], "recorded"
        if package in self.by_package:
            return self.by_package[package], "package"
        return float(DEFAULT_PER_ARCH), "default"


def estimate(job: BuildRequest, rates: Rates) -> Estimate:
    """A job's estimate: setup plus its GPU archs at the rate its records give."""
    rate, basis = rates.per_arch(job)
    return Estimate(SETUP + round(rate * len(job.sms)), basis)


def pack(jobs: Sequence[BuildRequest], rates: Rates, budget: int) -> list[tuple[BuildRequest, Estimate]]:
    """Each job within ``budget``: as it is where it fits, else cut into jobs of the same combo holding as
    many of its GPUs (oldest first) as fit. BadInput naming the cell that alone is past the budget."""
    packed: list[tuple[BuildRequest, Estimate]] = []
    for job in jobs:
        whole = estimate(job, rates)
        if whole.seconds <= budget:
            packed.append((job, whole))
            continue
        rate, basis = rates.per_arch(job)
        per_job = int((budget - SETUP) // rate) if rate > 0 else len(job.sms)
        if per_job < 1:
            c = job.combo
            raise BadInput(
                f"--budget: {job.package} {job.version} sm{job.sms[0].sm} for torch {format_version(c.torch)} "
                f"CUDA {format_version(c.cuda)} {c.python} {c.platform.value} is estimated at "
                f"{SETUP + round(rate)} s ({basis}), past the budget of {budget} s"
            )
        for i in range(0, len(job.sms), per_job):
            part = replace(job, sms=job.sms[i : i + per_job])
            packed.append((part, Estimate(SETUP + round(rate * len(part.sms)), basis)))
    return packed
