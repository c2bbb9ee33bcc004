"""The store index as values: each stored wheel's entry (its cell, bytes, facts, overrides, variant), the
entries that fail their checks, and the index of a store (or the part of it read). Pure. Their files, the root
``index.json`` and one shard per package, are :mod:`librarian.index_files`'.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from librarian.build_record import BuildRecord
from librarian.coords import Cell, GpuArch, Label, WheelName, format_version, parse_cuda, parse_torch
from librarian.errors import StoreError
from librarian.facts import WheelFacts, facts_from_json, facts_to_json
from librarian.jsonfile import short
from librarian.layout import Layout, check_path_part, check_store_path
from librarian.platforms import canonical_facts
from librarian.variant_format import variant_wheel_path

# Limits on what an index entry may hold, so hostile content fails in one line instead of exhausting memory.
MAX_WHEEL_SIZE = 1 << 50
SHARD_DIR = "index"


STAMP = "%Y-%m-%dT%H:%M:%SZ"  # how an entry's ``added`` (and a build's date) says a time: ISO 8601, UTC


def utc_stamp(when: datetime | None = None) -> str:
    """``when`` (default: now) as an entry records a time."""
    return (when or datetime.now(timezone.utc)).strftime(STAMP)


# WheelName is frozen, so one parse can serve every entry and every question (pull, plan and gc ask
# again and again); a bad name raises each time, and lru_cache keeps no exception.
_wheel_name = functools.lru_cache(maxsize=1 << 16)(WheelName.parse)


@dataclass(frozen=True, slots=True)
class VariantRef:
    """The variant wheel of a stored wheel's build (PEP 825): its filename, its bytes, and the properties
    its ``variant.json`` declares, as (namespace, feature, values), kept in one order (namespace, feature)
    so that two records of one variant compare equal however they were read."""

    filename: str
    sha256: str
    size: int
    properties: tuple[tuple[str, str, tuple[str, ...]], ...]

    def __post_init__(self) -> None:
        canonical = tuple(sorted((ns, f, tuple(v)) for ns, f, v in self.properties))
        if canonical != self.properties:
            object.__setattr__(self, "properties", canonical)

    @property
    def label(self) -> str:
        """The variant label: the filename's last field."""
        return self.filename.removesuffix(".whl").rsplit("-", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        """As the shard stores it."""
        nested: dict[str, dict[str, list[str]]] = {}
        for namespace, feature, values in self.properties:
            nested.setdefault(namespace, {})[feature] = list(values)
        return {"filename": self.filename, "sha256": self.sha256, "size": self.size, "properties": nested}

    @classmethod
    def from_json(cls, data: Any) -> VariantRef:
        """Parse and check one entry's ``variant`` (ValueError/TypeError on anything else)."""
        if not isinstance(data, dict):
            raise TypeError("'variant' is not an object")
        filename = _field(data, "filename", str)
        check_path_part(filename, "variant filename")
        if not filename.endswith(".whl"):
            raise ValueError("'variant' filename is not a wheel")
        sha = _field(data, "sha256", str)
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError("'variant' sha256 is not 64 hex digits")
        size = _field(data, "size", int)
        if not 0 <= size <= MAX_WHEEL_SIZE:
            raise ValueError("'variant' size out of range")
        nested = _field(data, "properties", dict)
        props = []
        for namespace, features in nested.items():
            if not isinstance(features, dict):
                raise TypeError("'variant' properties are not namespace -> feature -> values")
            for feature, values in features.items():
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    raise TypeError("'variant' property values are not a list of strings")
                props.append((namespace, feature, tuple(values)))
        return cls(filename, sha, size, tuple(props))


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stored wheel: where it is, what its bytes hash to, which cell it serves, what it demands."""

    path: str
    sha256: str
    size: int
    cell: Cell
    added: str = ""  # ISO 8601 UTC time it was published; gc --older-than reads it
    facts: WheelFacts | None = field(default=None, compare=False)  # parsed once, when the shard is read
    requires_python: str | None = None  # METADATA's Requires-Python: pull and the pip pages honour it
    metadata_sha256: str | None = None  # of ``<path>.metadata`` (PEP 658), where publish stored one
    overrides: tuple[
        str, ...
    ] = ()  # the publish flags that accepted a check on it (``--allow-glibc-mismatch``)
    variant: VariantRef | None = None  # its wheel-variant copy filed beside it, where the store makes them
    requires_torch: str | None = None  # METADATA's Requires-Dist on torch: pull and the pip pages honour it
    build: BuildRecord | None = None  # how librarian built it (source, toolchain, seconds, runner), if it did

    @property
    def variant_path(self) -> str | None:
        """Where its variant wheel is filed (``variant-wheels/<package>/``, one per build), if it has one."""
        return None if self.variant is None else variant_wheel_path(self.cell.package, self.variant.filename)

    @property
    def metadata_path(self) -> str | None:
        """Where the wheel's METADATA is served beside it (PEP 658), if it is."""
        return metadata_path(self.path) if self.metadata_sha256 else None

    @property
    def filename(self) -> str:
        """The wheel's filename: the last path component."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def name(self) -> WheelName:
        """The parsed wheel filename (parsed once per filename: resolution asks for it per candidate)."""
        return _wheel_name(self.filename)

    def to_json(self) -> dict[str, Any]:
        """This entry as the shard stores it."""
        name = self.name
        data: dict[str, Any] = {
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "filename": self.filename,
            "version": str(name.version),
            "label": str(self.cell.label),
            "tags": sorted(str(t) for t in name.tags),
            "cell": {
                "package": self.cell.package,
                "sm": str(self.cell.sm),
                "torch": format_version(self.cell.label.torch),
                "cuda": format_version(self.cell.label.cuda),
            },
            "added": self.added,
        }
        if self.facts is not None:
            data["facts"] = facts_to_json(self.facts)
        if self.requires_python:
            data["requires_python"] = self.requires_python
        if self.metadata_sha256:
            data["metadata_sha256"] = self.metadata_sha256
        if self.overrides:
            data["overrides"] = list(self.overrides)
        if self.variant is not None:
            data["variant"] = self.variant.to_json()
        if self.requires_torch:
            data["requires_torch"] = self.requires_torch
        if self.build is not None:
            data["build"] = self.build.to_json()
        return data

    @property
    def requires_python_spec(self) -> SpecifierSet | None:
        """Requires-Python as a specifier set (checked when the entry was made or read)."""
        return SpecifierSet(self.requires_python) if self.requires_python else None

    @property
    def requires_torch_spec(self) -> SpecifierSet | None:
        """Its Requires-Dist on torch as a specifier set (checked when the entry was made or read)."""
        return SpecifierSet(self.requires_torch) if self.requires_torch else None

    @classmethod
    def _parse(cls, data: dict[str, Any]) -> IndexEntry:
        """The entry ``data`` describes; KeyError, TypeError or ValueError where it breaks the schema."""
        cell = _cell(_field(data, "cell", dict))
        path = _field(data, "path", str)
        check_store_path(path)
        sha = _field(data, "sha256", str)
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError(f"sha256 {sha[:80]!r} is not 64 hex digits")
        size = _field(data, "size", int)
        if not 0 <= size <= MAX_WHEEL_SIZE:
            raise ValueError(f"size {size} out of range")
        added = data.get("added", "")
        if not isinstance(added, str):
            raise TypeError("'added' is not a string")
        facts = data.get("facts")
        if facts is not None:
            _check_facts(facts, path)
        requires = data.get("requires_python")
        metadata_sha = data.get("metadata_sha256")
        if requires is not None and not isinstance(requires, str):
            raise TypeError("'requires_python' is not a string")
        if metadata_sha is not None and (not isinstance(metadata_sha, str) or len(metadata_sha) != 64):
            raise ValueError("'metadata_sha256' is not 64 hex digits")
        overrides = data.get("overrides", [])
        if not isinstance(overrides, list) or not all(_is_flag(o) for o in overrides):
            raise ValueError("'overrides' is not a list of flags")
        variant = data.get("variant")
        requires_torch = data.get("requires_torch")
        if requires_torch is not None and not isinstance(requires_torch, str):
            raise TypeError("'requires_torch' is not a string")
        build = BuildRecord.from_json(data["build"]) if data.get("build") is not None else None
        return cls(
            path,
            sha,
            size,
            cell,
            added,
            canonical_facts(facts_from_json(path.rsplit("/", 1)[-1], facts)) if facts is not None else None,
            requires or None,
            metadata_sha or None,
            tuple(overrides),
            VariantRef.from_json(variant) if variant is not None else None,
            requires_torch or None,
            build,
        )

    @classmethod
    def from_json(cls, data: Any, source: str) -> IndexEntry:
        """Parse one shard entry, checked against the schema; ``source`` names the shard (and entry) in errors."""
        if not isinstance(data, dict):
            raise StoreError(f"{source}: malformed index entry (a JSON {type(data).__name__}, not an object)")
        path_text = data.get("path")
        where = f"{source}: malformed index entry" + (
            f" {path_text[:300]!r}" if isinstance(path_text, str) else ""
        )
        try:
            entry = cls._parse(data)
            entry.name  # noqa: B018 - the filename must parse
            entry.requires_python_spec  # noqa: B018 - and Requires-Python, if any
            entry.requires_torch_spec  # noqa: B018 - and the torch requirement, if any
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError, InvalidSpecifier) as e:
            raise StoreError(f"{where} ({short(e)})") from e
        return entry


def _cell(cell_data: Mapping[str, Any]) -> Cell:
    """An entry's ``cell`` object as a value."""
    label = Label(parse_cuda(_field(cell_data, "cuda", str)), parse_torch(_field(cell_data, "torch", str)))
    return Cell(
        package=_field(cell_data, "package", str), sm=GpuArch.parse(_field(cell_data, "sm", str)), label=label
    )


@dataclass(frozen=True, slots=True)
class BadEntry:
    """A shard entry that failed its checks. It poisons only itself: the package's other entries stay
    listable and pullable, verify names it, ``reindex`` re-reads its wheel and writes it anew, and every
    other write keeps it as it was read (nothing is dropped behind the user's back)."""

    package: str
    path: str | None  # the store path it names, when that much is a string
    problem: str
    raw: Any = field(default=None, compare=False)  # the JSON as read, written back until it is repaired

    @property
    def where(self) -> str:
        """Its path, or its shard where it names none."""
        return self.path or shard_path(self.package)


@dataclass(frozen=True, slots=True)
class Index:
    """The whole catalogue of a store (or the part of it that was read)."""

    layout: Layout
    entries: tuple[IndexEntry, ...] = ()
    bad: tuple[BadEntry, ...] = ()  # entries that failed their checks (see BadEntry)

    def by_path(self) -> dict[str, IndexEntry]:
        """Entries keyed by store path."""
        return {e.path: e for e in self.entries}

    def packages(self) -> list[str]:
        """The packages present, sorted."""
        return sorted({e.cell.package for e in self.entries} | {b.package for b in self.bad})

    def for_package(self, package: str) -> tuple[IndexEntry, ...]:
        """The entries of one package (by pip's name matching)."""
        return tuple(e for e in self.entries if e.cell.package == package)

    def with_entries(self, added: Iterable[IndexEntry] = (), removed: Iterable[str] = ()) -> Index:
        """A new index with ``added`` entries (replacing any at the same path) and ``removed`` paths gone."""
        kept = self.by_path()
        added, removed = list(added), list(removed)
        for path in removed:
            kept.pop(path, None)
        for entry in added:
            kept[entry.path] = entry
        gone = {*removed, *(e.path for e in added)}  # a bad entry written anew, or removed, is settled
        bad = tuple(b for b in self.bad if b.path not in gone)
        return replace(self, entries=tuple(sorted(kept.values(), key=lambda e: e.path)), bad=bad)


def metadata_path(wheel_path: str) -> str:
    """PEP 658: a wheel's METADATA is served at the wheel's URL plus ``.metadata``."""
    return wheel_path + ".metadata"


def _is_flag(value: object) -> bool:
    return (
        isinstance(value, str)
        and value.startswith("--")
        and len(value) <= 64
        and value[2:].replace("-", "").isalnum()
    )


def _field(data: Mapping[str, Any], key: str, kind: type) -> Any:
    """``data[key]``, which must be a ``kind`` (a bool is no int); KeyError / ValueError if not."""
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{key!r} is a JSON {type(value).__name__}, expected {kind.__name__}")
    return value


def _check_facts(facts: Any, path: str) -> None:
    """The facts must parse as :func:`librarian.facts.facts_from_json` reads them (pull does, later)."""
    if not isinstance(facts, dict):
        raise TypeError(f"'facts' is a JSON {type(facts).__name__}, expected object")
    binaries = facts.get("binaries", [])
    if not isinstance(binaries, list) or not all(isinstance(b, dict) for b in binaries):
        raise ValueError("'facts.binaries' is not a list of objects")
    for b in binaries:
        for key, value in b.items():
            if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                raise ValueError(f"'facts.binaries.{key}' is not a list of strings")
            if isinstance(value, dict):
                raise TypeError(f"'facts.binaries.{key}' is an object")


def entry_problems(entry: IndexEntry, layout: Layout | None = None) -> list[str]:
    """Pure: where an entry contradicts itself: its cell against its filename and (given ``layout``) path.

    A ``tinykern`` entry whose path names ``evilpkg``'s wheel would otherwise hand out evilpkg.
    """
    problems = []
    name = entry.name
    if name.package != entry.cell.package:
        problems.append(f"index entry of package {entry.cell.package} names a wheel of {name.package}")
    if name.label is not None and name.label != entry.cell.label:
        problems.append(f"index entry for {entry.cell.label} names a wheel labelled {name.label}")
    if layout is not None:
        parsed = layout.parse_path(entry.path)
        if parsed is None:
            problems.append(f"index entry's path is not where layout {layout.name!r} puts wheels")
        elif parsed[0] != entry.cell:
            cell = entry.cell
            problems.append(
                f"index entry says {cell.package} sm{cell.sm.sm} {cell.label}, its path says "
                f"{parsed[0].package} sm{parsed[0].sm.sm} {parsed[0].label}"
            )
    return problems


def shard_path(package: str) -> str:
    """Where a package's shard lives: ``index/flash_attn.json``."""
    check_path_part(package, "package name")
    return f"{SHARD_DIR}/{package}.json"
