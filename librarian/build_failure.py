"""A failed build, remembered in the store so that plan does not plan it again for hours of the same failure:
the cells it was for (package, version, combo, GPUs), its source and toolchain, when, the step that failed
and the log's last lines. Each failed build is one small file, ``failures/<package>/<version>/<combo>-<sms>.json``
(one name per cells: a rerun's record replaces the last), written in one step that touches no index (so two
jobs failing at once never conflict). Pure: its path, its JSON, and parsing that checks it against its path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from librarian.build_record import MAX_TEXT, Source, Toolchain
from librarian.coords import package_key
from librarian.errors import LibrarianError
from librarian.jsonfile import dump_json, read_json_object
from librarian.layout import check_path_part

FAILURES_DIR = "failures"
SCHEMA = 1
MAX_TAIL = 20  # the log's last lines a record keeps
MAX_RECORD_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class FailedCells:
    """What a failed build was for: the package (its key), version, combo (torch, CUDA, CPython, platform as
    plan's jobs name them) and GPUs (``sm`` numbers)."""

    package: str
    version: str
    torch: str
    cuda: str
    python: str
    platform: str
    sms: tuple[str, ...]

    @property
    def combo_name(self) -> str:
        return f"{self.python}-torch{self.torch}-cu{self.cuda.replace('.', '')}-{self.platform}"


@dataclass(frozen=True, slots=True)
class BuildFailure:
    """One failed build (see the module's docstring)."""

    cells: FailedCells
    source: Source
    toolchain: Toolchain
    date: str
    step: str  # what failed: "compile", "installing torch", "check", ...
    tail: tuple[str, ...] = ()
    runner: str = ""
    # what plan gave the build to build with (the combo's builder image and torch install line): plan plans
    # the cells again when that changes (a new toolchain may compile what this one could not)
    recipe: str = ""
    error: str = ""  # the log's first line that says what the compiler could not do

    @property
    def path(self) -> str:
        """Where the record is stored."""
        return failure_path(self.cells)

    @property
    def reason(self) -> str:
        """One line: the step, and the log's last line that says most."""
        said = self.error or next((line for line in reversed(self.tail) if line.strip()), "")
        return f"{self.step} failed{': ' + said.strip()[:200] if said else ''}"

    def to_json(self) -> dict[str, Any]:
        c = self.cells
        return {
            "schema": SCHEMA,
            "package": c.package,
            "version": c.version,
            "torch": c.torch,
            "cuda": c.cuda,
            "python": c.python,
            "platform": c.platform,
            "sms": list(c.sms),
            "source": self.source.to_json(),
            "toolchain": self.toolchain.to_json(),
            "date": self.date,
            "step": self.step,
            "tail": list(self.tail[-MAX_TAIL:]),
            "runner": self.runner,
            "recipe": self.recipe,
            "error": self.error,
        }


def failure_path(cells: FailedCells) -> str:
    """``failures/<package>/<version>/<combo>-sm80-sm90.json``; BadInput for a part that would escape it."""
    name = f"{cells.combo_name}-{'-'.join(f'sm{s}' for s in cells.sms)}.json"
    for part in (cells.package, cells.version, name):
        check_path_part(part, "failure record path")
    return f"{FAILURES_DIR}/{cells.package}/{cells.version}/{name}"


def render_failure(failure: BuildFailure) -> bytes:
    return dump_json(failure.to_json())


def _strings(data: dict[str, Any], key: str, most: int) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or len(value) > most or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} is not a list of at most {most} strings")
    return tuple(v[:MAX_TEXT] for v in value)


def parse_failure(text: bytes, path: str) -> BuildFailure:
    """The record stored at ``path``; ValueError (one line) where it is corrupt or contradicts its path."""
    if len(text) > MAX_RECORD_BYTES:
        raise ValueError(f"larger than {MAX_RECORD_BYTES} bytes")
    try:
        data = read_json_object(text, path, "failure record", (SCHEMA,))
    except LibrarianError as e:
        raise ValueError(str(e).removeprefix(f"{path}: ")) from e
    try:
        fields = []
        for key in ("package", "version", "torch", "cuda", "python", "platform"):
            value = data.get(key)
            if not isinstance(value, str) or not value or len(value) > 100:
                raise ValueError(f"{key!r} is not a name")
            fields.append(value)
        sms = _strings(data, "sms", 64)
        if not sms or not all(s.isdigit() or (s[:-1].isdigit() and s[-1] in "af") for s in sms):
            raise ValueError("'sms' is not a list of GPU numbers")
        version, torch, cuda, python, platform = fields[1:]
        cells = FailedCells(package_key(fields[0]), version, torch, cuda, python, platform, sms)
        words = ("step", "date", "runner", "recipe", "error")
        step, date, runner, recipe, error = (data.get(k, "") for k in words)
        if not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in (step, date, runner, recipe, error)):
            raise ValueError(f"{', '.join(map(repr, words))}: each a string")
        failure = BuildFailure(cells, Source.from_json(data.get("source")),
                               Toolchain.from_json(data.get("toolchain")), str(date), str(step) or "build",
                               _strings(data, "tail", MAX_TAIL), str(runner), str(recipe), str(error))  # fmt: skip
    except (TypeError, ValueError) as e:
        raise ValueError(str(e)[:300]) from e
    if failure.path != path:
        raise ValueError(f"its cells' path is {failure.path}, not {path}")
    return failure
