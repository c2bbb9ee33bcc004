"""The matrix file format: the values a matrix file holds, parsed and checked on load, written back.

A matrix file is TOML: ``[[torch]]`` release rows each with ``[[torch.cuda]]`` lines, ``[[arch]]`` rows
(torch's own ``TORCH_CUDA_ARCH_LIST`` per CUDA line) and ``[[served]]`` rows (what PyTorch's wheel index
served, written by ``librarian matrix refresh``). Pure: text in, values out. Queries live in
:mod:`librarian.pytorch.matrix`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from dataclasses import dataclass
from typing import Any

import tomli_w

from librarian.compat import tomllib
from librarian.coords import GpuArch, MajorMinor, format_version, parse_cuda, parse_torch
from librarian.errors import BadInput

SCHEMA = 1


class Status(enum.Enum):
    """How PyTorch ships a CUDA line for a torch minor; ordered from most to least official."""

    STABLE = "stable"
    EXPERIMENTAL = "experimental"
    SERVED = "served"  # on download.pytorch.org, though the release matrix does not name it

    @property
    def rank(self) -> int:
        """0 for stable, 1 for experimental, 2 for served."""
        return list(Status).index(self)


class CxxAbi(enum.Enum):
    """The libstdc++ ABI of the Linux torch wheels (``torch.compiled_with_cxx11_abi()``)."""

    PRE_CXX11 = "pre-cxx11"
    CXX11 = "cxx11"


class Platform(enum.Enum):
    """A platform torch CUDA wheels are built for; the wheel tags' many spellings map onto these."""

    LINUX_X86_64 = "linux-x86_64"
    LINUX_AARCH64 = "linux-aarch64"
    WINDOWS_AMD64 = "windows-amd64"

    @property
    def runs_on(self) -> str:
        """A GitHub-hosted runner that builds for this platform (a hint; self-hosted GPUs differ)."""
        return _RUNS_ON[self]

    @property
    def cpu(self) -> str:
        """Its CPU in librarian's vocabulary: ``x86_64``, ``aarch64``."""
        return "aarch64" if self is Platform.LINUX_AARCH64 else "x86_64"

    def container(self, cuda: MajorMinor) -> str:
        """The image a build for CUDA ``cuda`` runs in: PyTorch's own manylinux builders (CUDA and every
        CPython under /opt/python); ``""`` on Windows, where the runner installs the toolkit."""
        image = _BUILDER.get(self)
        return f"{image}:cuda{format_version(cuda)}" if image else ""

    @classmethod
    def parse(cls, text: str) -> Platform:
        """``--platform``'s one vocabulary: PyTorch's name (``linux-x86_64``) or a wheel tag of it
        (``manylinux_2_28_x86_64``, ``linux_aarch64``, ``win_amd64``); ValueError naming both forms."""
        value = text.strip().lower()
        try:
            return cls(value)
        except ValueError:
            found = cls.from_wheel_tag(value)
        if found is None:
            known = ", ".join(p.value for p in cls)
            raise ValueError(
                f"--platform {text}: not a platform torch builds CUDA wheels for ({known}, or a wheel tag of one: "
                "manylinux_2_28_x86_64, win_amd64)"
            )
        return found

    @classmethod
    def of_machine(cls, os: str | None, cpu: str | None) -> Platform | None:
        """The platform of a machine's OS (``sys.platform``'s name) and CPU, where torch builds CUDA wheels for it."""
        return {
            ("linux", "x86_64"): cls.LINUX_X86_64,
            ("linux", "aarch64"): cls.LINUX_AARCH64,
            ("win32", "x86_64"): cls.WINDOWS_AMD64,
        }.get((str(os), str(cpu)))

    @classmethod
    def from_wheel_tag(cls, tag: str) -> Platform | None:
        """``manylinux_2_28_x86_64``/``linux_x86_64`` -> linux-x86_64; ``None`` for other platforms."""
        if tag == "win_amd64":
            return cls.WINDOWS_AMD64
        if re.fullmatch(r"(many|musl)?linux[0-9_]*_(x86_64|aarch64)", tag):
            return cls.LINUX_X86_64 if tag.endswith("x86_64") else cls.LINUX_AARCH64
        return None


_BUILDER = {
    Platform.LINUX_X86_64: "pytorch/manylinux2_28-builder",
    Platform.LINUX_AARCH64: "pytorch/manylinuxaarch64-builder",
}
_RUNS_ON = {
    Platform.LINUX_X86_64: "ubuntu-22.04",
    Platform.LINUX_AARCH64: "ubuntu-22.04-arm",
    Platform.WINDOWS_AMD64: "windows-2022",
}


@dataclass(frozen=True, slots=True)
class CPython:
    """A CPython the wheels are built for: ``cp312``, or ``cp313t`` for the free-threaded build."""

    major: int
    minor: int
    free_threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> CPython:
        """Parse ``cp312``, ``3.12``, ``312``, ``cp313t`` or ``3.13t``."""
        m = re.fullmatch(r"(?:cp)?(\d)\.?(\d{1,2})(t?)", text.strip().lower())
        if m is None:
            raise BadInput(f"{text}: not a CPython version (expected e.g. 3.12, cp312 or 3.13t)")
        return cls(int(m[1]), int(m[2]), m[3] == "t")

    @property
    def version(self) -> str:
        """``3.12`` / ``3.13t``: what ``actions/setup-python`` takes."""
        return f"{self.major}.{self.minor}{'t' if self.free_threaded else ''}"

    @property
    def key(self) -> tuple[int, int, bool]:
        """Sort key: numeric, so cp39 sorts before cp310."""
        return self.major, self.minor, self.free_threaded

    def __str__(self) -> str:
        return f"cp{self.major}{self.minor}{'t' if self.free_threaded else ''}"


@dataclass(frozen=True, slots=True)
class CudaRow:
    """One CUDA line of one torch minor, as the release matrix gives it, with its source."""

    line: MajorMinor
    status: Status
    abi: CxxAbi
    python: tuple[CPython, ...]
    platforms: tuple[Platform, ...]
    source: str
    date: dt.date
    python_experimental: tuple[CPython, ...] = ()
    uncertain: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class TorchRow:
    """One torch minor and its CUDA lines."""

    version: MajorMinor
    cuda: tuple[CudaRow, ...]
    note: str = ""
    partial: bool = False  # its CUDA lines are known only in part (the index that lists them was not read)


@dataclass(frozen=True, slots=True)
class ArchRow:
    """The ``TORCH_CUDA_ARCH_LIST`` torch's own wheels were built with, for one CUDA line and platform."""

    cuda: MajorMinor
    platform: Platform
    arch_list: str
    source: str
    torch: tuple[MajorMinor, ...] = ()  # the releases the source covers; empty when not known
    date: dt.date | None = None
    uncertain: tuple[str, ...] = ()
    note: str = ""

    @property
    def sass(self) -> tuple[GpuArch, ...]:
        """The archs torch ships machine code for: ``7.5`` -> sm_75."""
        return tuple(GpuArch.parse(a.removesuffix("+PTX")) for a in self.arch_list.split(";"))

    @property
    def ptx(self) -> tuple[GpuArch, ...]:
        """The archs torch also ships PTX for (``12.0+PTX`` -> compute_120)."""
        return tuple(
            GpuArch.parse("compute_" + a[: -len("+PTX")].replace(".", ""))
            for a in self.arch_list.split(";")
            if a.endswith("+PTX")
        )


@dataclass(frozen=True, slots=True)
class ServedRow:
    """The CPythons PyTorch's wheel index served for one (torch, CUDA, platform), as ``matrix refresh`` read it.

    Keyed by platform too, since the Pythons differ per platform (no free-threaded Windows wheels, say).
    """

    torch: MajorMinor
    cuda: MajorMinor
    platform: Platform
    python: tuple[CPython, ...]
    source: str
    date: dt.date


@dataclass(frozen=True, slots=True)
class MatrixDoc:
    """The contents of one matrix file (the packaged one or a user override)."""

    torch: tuple[TorchRow, ...] = ()
    arch: tuple[ArchRow, ...] = ()
    served: tuple[ServedRow, ...] = ()
    note: str = ""


# --- parsing: TOML text -> MatrixDoc, collecting every problem --------------------------------------

_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # table kind -> (required, optional)
    "top": ({"schema"}, {"note", "torch", "arch", "served"}),
    "torch": ({"version", "cuda"}, {"note", "partial"}),
    "cuda": (
        {"line", "status", "abi", "python", "platforms", "source", "date"},
        {"python_experimental", "uncertain", "note"},
    ),
    "arch": ({"cuda", "platform", "arch_list", "source"}, {"torch", "date", "uncertain", "note"}),
    "served": ({"torch", "cuda", "platform", "python", "source", "date"}, set()),
}
_ARCH_LIST = re.compile(r"\d+\.\d+[af]?(\+PTX)?(;\d+\.\d+[af]?(\+PTX)?)*")


class _Reader:
    """Reads one file's tables, recording problems as ``where: problem`` instead of stopping."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fields(self, table: Any, kind: str, where: str) -> dict[str, Any] | None:
        if not isinstance(table, dict):
            self.problems.append(f"{where}: expected a table")
            return None
        required, optional = _FIELDS[kind]
        for name in sorted(set(table) - required - optional):
            self.problems.append(f"{where}: unknown field {name!r}")
        for name in sorted(required - set(table)):
            self.problems.append(f"{where}: missing field {name!r}")
        return table if required <= set(table) else None

    def tables(self, parent: dict[str, Any], name: str, where: str) -> list[Any]:
        raw = parent.get(name, [])
        if not isinstance(raw, list):
            self.problems.append(f"{where}: expected an array of tables [[{name}]]")
            return []
        return raw

    def unique(self, keys: list[Any], what: str) -> None:
        for k in sorted({k for k in keys if keys.count(k) > 1 and k is not None}, key=str):
            self.problems.append(f"{what} {k} given twice")

    def value(self, where: str, name: str, raw: Any, convert: Any) -> Any:
        try:
            if isinstance(raw, list):
                return tuple(convert(x) for x in raw)
            return convert(raw)
        except (BadInput, ValueError, TypeError, AttributeError) as e:
            self.problems.append(f"{where}: {name}: {e}")
            return None


def _text(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(f"expected text, got {x!r}")
    return x


def _bool(x: Any) -> bool:
    if not isinstance(x, bool):
        raise TypeError(f"expected true or false, got {x!r}")
    return x


def _date(x: Any) -> dt.date:
    if not isinstance(x, dt.date) or isinstance(x, dt.datetime):
        raise TypeError(f"expected a date (2025-08-06), got {x!r}")
    return x


def _arch_list(x: Any) -> str:
    if not _ARCH_LIST.fullmatch(_text(x)):
        raise ValueError(f"{x!r} is not a TORCH_CUDA_ARCH_LIST such as '8.0;9.0;12.0+PTX'")
    return str(x)


def _list(r: _Reader, t: dict[str, Any], where: str, name: str, convert: Any) -> tuple[Any, ...]:
    raw = t.get(name, [])
    if not isinstance(raw, list):
        r.problems.append(f"{where}: {name}: expected a list")
        return ()
    got = r.value(where, name, raw, convert)
    return got if got is not None else ()


def _uncertain(r: _Reader, t: dict[str, Any], where: str, kind: str) -> tuple[str, ...]:
    names = _list(r, t, where, "uncertain", _text)
    for name in names:
        if name not in _FIELDS[kind][0] | _FIELDS[kind][1]:
            r.problems.append(f"{where}: uncertain: {name!r} names no field")
    return names


def _cuda_row(r: _Reader, t: dict[str, Any], where: str) -> CudaRow:
    return CudaRow(
        line=r.value(where, "line", t["line"], parse_cuda),
        status=r.value(where, "status", t["status"], Status),
        abi=r.value(where, "abi", t["abi"], CxxAbi),
        python=_list(r, t, where, "python", CPython.parse),
        platforms=_list(r, t, where, "platforms", Platform),
        source=r.value(where, "source", t["source"], _text),
        date=r.value(where, "date", t["date"], _date),
        python_experimental=_list(r, t, where, "python_experimental", CPython.parse),
        uncertain=_uncertain(r, t, where, "cuda"),
        note=r.value(where, "note", t.get("note", ""), _text),
    )


def _arch_row(r: _Reader, t: dict[str, Any], where: str) -> ArchRow:
    return ArchRow(
        cuda=r.value(where, "cuda", t["cuda"], parse_cuda),
        platform=r.value(where, "platform", t["platform"], Platform),
        arch_list=r.value(where, "arch_list", t["arch_list"], _arch_list),
        source=r.value(where, "source", t["source"], _text),
        torch=_list(r, t, where, "torch", parse_torch),
        date=r.value(where, "date", t["date"], _date) if "date" in t else None,
        uncertain=_uncertain(r, t, where, "arch"),
        note=r.value(where, "note", t.get("note", ""), _text),
    )


def _served_row(r: _Reader, t: dict[str, Any], where: str) -> ServedRow:
    return ServedRow(
        torch=r.value(where, "torch", t["torch"], parse_torch),
        cuda=r.value(where, "cuda", t["cuda"], parse_cuda),
        platform=r.value(where, "platform", t["platform"], Platform),
        python=_list(r, t, where, "python", CPython.parse),
        source=r.value(where, "source", t["source"], _text),
        date=r.value(where, "date", t["date"], _date),
    )


def parse_matrix(text: str, origin: str) -> MatrixDoc:
    """Parse a matrix file's text; every problem is reported at once, prefixed by ``origin``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{origin}: not valid TOML ({e})") from e
    except RecursionError as e:  # arrays or tables nested past what the parser recurses into
        raise BadInput(f"{origin}: not valid TOML (nested too deeply)") from e
    r = _Reader()
    top = r.fields(data, "top", "top level")
    if top is not None and top["schema"] != SCHEMA:
        r.problems.append(f"schema: {top['schema']!r} is not {SCHEMA}, the one this librarian reads")
    torch_rows, arch_rows, served_rows = [], [], []
    for i, t in enumerate(r.tables(data, "torch", "torch")):
        where = f"torch[{t.get('version', i) if isinstance(t, dict) else i}]"
        if (tf := r.fields(t, "torch", where)) is not None:
            rows = []
            for j, c in enumerate(r.tables(tf, "cuda", f"{where}.cuda")):
                at = f"{where}.cuda[{c.get('line', j) if isinstance(c, dict) else j}]"
                if r.fields(c, "cuda", at) is not None:
                    rows.append(_cuda_row(r, c, at))
            r.unique([c.line for c in rows], f"{where}: CUDA line")
            torch_rows.append(
                TorchRow(
                    r.value(where, "version", tf["version"], parse_torch),
                    tuple(rows),
                    r.value(where, "note", tf.get("note", ""), _text),
                    r.value(where, "partial", tf.get("partial", False), _bool),
                )
            )
    r.unique([t.version for t in torch_rows], "torch version")
    for i, t in enumerate(r.tables(data, "arch", "arch")):
        if r.fields(t, "arch", f"arch[{i}]") is not None:
            arch_rows.append(_arch_row(r, t, f"arch[{i}]"))
    for i, t in enumerate(r.tables(data, "served", "served")):
        if r.fields(t, "served", f"served[{i}]") is not None:
            served_rows.append(_served_row(r, t, f"served[{i}]"))
    r.unique([_served_key(s) for s in served_rows], "served (torch, CUDA, platform)")
    if r.problems:
        raise BadInput(f"{origin}: " + "; ".join(r.problems))
    return MatrixDoc(tuple(torch_rows), tuple(arch_rows), tuple(served_rows), str(data.get("note", "")))


# --- writing: MatrixDoc -> TOML text (round-trips through parse_matrix) -----------------------------


def _plain(v: Any) -> Any:
    """A value as the file holds it: versions as "2.8", enums and CPythons as text, rows as tables."""
    if isinstance(v, CPython):
        return str(v)
    if dataclasses.is_dataclass(v):
        items = ((f.name, _plain(getattr(v, f.name))) for f in dataclasses.fields(v))
        return {k: x for k, x in items if x not in ("", [], None) and x is not False}  # defaults are left out
    if isinstance(v, tuple):
        if len(v) == 2 and all(isinstance(x, int) for x in v):
            return format_version(v)
        return [_plain(x) for x in v]
    return v.value if isinstance(v, enum.Enum) else v


def dump_matrix(doc: MatrixDoc) -> str:
    """The TOML text of ``doc``; ``parse_matrix(dump_matrix(d), ...) == d``."""
    return tomli_w.dumps({"schema": SCHEMA, **_plain(doc)})


def _served_key(s: ServedRow) -> tuple[MajorMinor, MajorMinor, str]:
    return s.torch, s.cuda, s.platform.value if s.platform else ""


def merge_matrix(base: MatrixDoc, override: MatrixDoc) -> MatrixDoc:
    """``base`` with ``override`` laid over it: rows with the same key are replaced, new ones added."""
    torch = {t.version: t for t in base.torch}
    for t in override.torch:
        old = torch.get(t.version)
        rows = {c.line: c for c in (old.cuda if old else ())} | {c.line: c for c in t.cuda}
        # The override's rows are what the index serves now: a partial packaged row stays partial only if
        # the override says nothing of that torch line.
        torch[t.version] = TorchRow(
            t.version, tuple(rows[k] for k in sorted(rows)), t.note or (old.note if old else ""), t.partial
        )
    arch = {(a.cuda, a.platform, a.torch): a for a in base.arch} | {
        (a.cuda, a.platform, a.torch): a for a in override.arch
    }
    served = {_served_key(s): s for s in base.served} | {_served_key(s): s for s in override.served}
    return MatrixDoc(
        tuple(torch[k] for k in sorted(torch)),
        tuple(arch.values()),
        tuple(served[k] for k in sorted(served)),
        override.note or base.note,
    )
