"""The matrix file format's one reader and one writer: TOML text in, a checked :class:`MatrixDoc` out (every
problem collected, then one :class:`BadInput`), and back (``parse_matrix(dump_matrix(d)) == d``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from typing import Any

import tomli_w

from librarian.compat import tomllib
from librarian.coords import format_version, parse_cuda, parse_torch
from librarian.errors import BadInput
from librarian.pytorch.releases import (
    ArchRow,
    CPython,
    CudaRow,
    CxxAbi,
    MatrixDoc,
    Platform,
    ServedRow,
    Status,
    TorchRow,
)

SCHEMA = 1

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
    r.unique([s.key for s in served_rows], "served (torch, CUDA, platform)")
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
