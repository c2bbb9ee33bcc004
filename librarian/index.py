"""The store index: a small root ``index.json`` and one shard per package, to and from JSON. Pure.

Root::

    {"schema": 1, "layout": {"name": "wheelhouse", "path": "{package}/..."},
     "packages": {"flash_attn": {"shard": "index/flash_attn.json", "wheels": 12, "sha256": "..."}}}

Shard ``index/flash_attn.json``::

    {"schema": 1, "package": "flash_attn", "wheels": [{"path": ..., "sha256": ..., "size": ...,
     "filename": ..., "version": "2.8.3+cu128torch2.9", "label": "cu128torch2.9", "tags": [...],
     "cell": {"package": ..., "sm": "sm_89", "torch": "2.9", "cuda": "12.8"}, "added": "...", "facts": {...}}]}

The JSON is written deterministically (sorted), so a shard whose package did not change is
byte-identical and a store can skip rewriting it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from librarian.coords import Cell, GpuArch, Label, WheelName, format_version, parse_cuda, parse_torch
from librarian.errors import BadInput, StoreError
from librarian.facts import WheelFacts, facts_from_json, facts_to_json
from librarian.layout import Layout, check_path_part, check_store_path

SCHEMA = 1
ROOT = "index.json"
SHARD_DIR = "index"
# Staged entries (``publish --stage``) wait here for ``reindex``. Under ``index/`` because that folder is
# librarian's own: no layout files wheels there, and no shard path (``index/<package>.json``) is a folder.
PENDING_DIR = f"{SHARD_DIR}/pending"
_PENDING_SHA = 16  # hex digits of the wheel's sha256 in a pending file's name


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
        """The parsed wheel filename."""
        return WheelName.parse(self.filename)

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
        return data

    @property
    def requires_python_spec(self) -> SpecifierSet | None:
        """Requires-Python as a specifier set (checked when the entry was made or read)."""
        return SpecifierSet(self.requires_python) if self.requires_python else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> IndexEntry:
        """Parse one shard entry; ``source`` names the shard in errors."""
        try:
            cell_data = data["cell"]
            cell = Cell(
                package=str(cell_data["package"]),
                sm=GpuArch.parse(str(cell_data["sm"])),
                label=Label(parse_cuda(str(cell_data["cuda"])), parse_torch(str(cell_data["torch"]))),
            )
            path = str(data["path"])
            check_store_path(path)
            filename = path.rsplit("/", 1)[-1]
            raw_facts = data.get("facts")
            requires = data.get("requires_python")
            metadata_sha = data.get("metadata_sha256")
            entry = cls(
                path,
                str(data["sha256"]),
                int(data["size"]),
                cell,
                str(data.get("added", "")),
                facts_from_json(filename, raw_facts) if raw_facts is not None else None,
                str(requires) if requires else None,
                str(metadata_sha) if metadata_sha else None,
            )
            entry.name  # noqa: B018 - the filename must parse
            entry.requires_python_spec  # noqa: B018 - and Requires-Python, if any
        except (KeyError, TypeError, ValueError, AttributeError, InvalidSpecifier) as e:
            raise StoreError(f"{source}: malformed index entry {data.get('path', '?')!r} ({e})") from e
        return entry


@dataclass(frozen=True, slots=True)
class Index:
    """The whole catalogue of a store (or the part of it that was read)."""

    layout: Layout
    entries: tuple[IndexEntry, ...] = ()

    def by_path(self) -> dict[str, IndexEntry]:
        """Entries keyed by store path."""
        return {e.path: e for e in self.entries}

    def packages(self) -> list[str]:
        """The packages present, sorted."""
        return sorted({e.cell.package for e in self.entries})

    def for_package(self, package: str) -> tuple[IndexEntry, ...]:
        """The entries of one package (by pip's name matching)."""
        return tuple(e for e in self.entries if e.cell.package == package)

    def with_entries(self, added: Iterable[IndexEntry] = (), removed: Iterable[str] = ()) -> Index:
        """A new index with ``added`` entries (replacing any at the same path) and ``removed`` paths gone."""
        kept = self.by_path()
        for path in removed:
            kept.pop(path, None)
        for entry in added:
            kept[entry.path] = entry
        return replace(self, entries=tuple(sorted(kept.values(), key=lambda e: e.path)))


def metadata_path(wheel_path: str) -> str:
    """PEP 658: a wheel's METADATA is served at the wheel's URL plus ``.metadata``."""
    return wheel_path + ".metadata"


def shard_path(package: str) -> str:
    """Where a package's shard lives: ``index/flash_attn.json``."""
    check_path_part(package, "package name")
    return f"{SHARD_DIR}/{package}.json"


def _dump(data: Any) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


def render_index(index: Index) -> dict[str, bytes]:
    """The index files to write: every shard and the root (``index.json``), by store path."""
    files: dict[str, bytes] = {}
    packages: dict[str, Any] = {}
    for package in index.packages():
        entries = sorted(index.for_package(package), key=lambda e: e.path)
        shard = {"schema": SCHEMA, "package": package, "wheels": [e.to_json() for e in entries]}
        body = _dump(shard)
        path = shard_path(package)
        files[path] = body
        packages[package] = {
            "shard": path,
            "wheels": len(entries),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    root = {
        "schema": SCHEMA,
        "layout": {"name": index.layout.name, "path": index.layout.path},
        "packages": packages,
    }
    files[ROOT] = _dump(root)
    return files


@dataclass(frozen=True, slots=True)
class RootIndex:
    """The parsed root ``index.json``: the layout and where each package's shard is."""

    layout: Layout
    shards: Mapping[str, str]  # package -> shard path
    shard_sha256: Mapping[str, str] = field(default_factory=dict)


def _load_json(text: bytes, source: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StoreError(f"{source}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise StoreError(f"{source}: expected a JSON object")
    if data.get("schema") != SCHEMA:
        raise StoreError(
            f"{source}: unsupported index schema {data.get('schema')!r} (this librarian reads {SCHEMA})"
        )
    return data


def parse_root(text: bytes, source: str = ROOT) -> RootIndex:
    """Parse the root index."""
    data = _load_json(text, source)
    try:
        layout = Layout(str(data["layout"]["name"]), str(data["layout"]["path"]))
        packages = data["packages"]
        shards = {str(k): str(v["shard"]) for k, v in packages.items()}
        sums = {str(k): str(v.get("sha256", "")) for k, v in packages.items()}
    except (KeyError, TypeError, AttributeError, BadInput) as e:
        raise StoreError(f"{source}: malformed root index ({e})") from e
    for package, path in shards.items():
        if path != shard_path(package):
            raise StoreError(f"{source}: shard of {package!r} at unexpected path {path!r}")
    return RootIndex(layout, shards, sums)


def parse_shard(text: bytes, source: str) -> tuple[IndexEntry, ...]:
    """Parse one package shard."""
    data = _load_json(text, source)
    wheels = data.get("wheels")
    if not isinstance(wheels, list):
        raise StoreError(f"{source}: malformed shard (no wheels list)")
    return tuple(IndexEntry.from_json(w, source) for w in wheels)


def pending_path(entry: IndexEntry) -> str:
    """Where a staged entry waits for ``reindex``: ``index/pending/<store path>.<sha256[:16]>.json``.

    One name per (store path, bytes): two jobs write the same name only when they stage the very same
    wheel at the very same path, and then either file is right. So staging commits never collide.
    """
    return f"{PENDING_DIR}/{entry.path}.{entry.sha256[:_PENDING_SHA]}.json"


def parse_pending_path(path: str) -> tuple[str, str] | None:
    """The (store path, sha256 prefix) a pending file stands for, or ``None`` if ``path`` is not one."""
    if not path.startswith(PENDING_DIR + "/") or not path.endswith(".json"):
        return None
    stem = path[len(PENDING_DIR) + 1 : -len(".json")]
    wheel, _, sha = stem.rpartition(".")
    if not wheel.endswith(".whl") or len(sha) != _PENDING_SHA or any(c not in "0123456789abcdef" for c in sha):
        return None
    return wheel, sha


def render_pending(entry: IndexEntry) -> bytes:
    """A pending file's bytes: the entry as its shard will hold it."""
    return _dump({"schema": SCHEMA, "entry": entry.to_json()})


def parse_pending(text: bytes, path: str, source: str) -> IndexEntry:
    """Parse the pending file at store path ``path``; it must describe the wheel its name says."""
    data = _load_json(text, source)
    raw = data.get("entry")
    if not isinstance(raw, dict):
        raise StoreError(f"{source}: malformed pending entry (no entry object)")
    entry = IndexEntry.from_json(raw, source)
    if parse_pending_path(path) != (entry.path, entry.sha256[:_PENDING_SHA]):
        raise StoreError(f"{source}: entry for {entry.path} does not match the file's name")
    return entry
