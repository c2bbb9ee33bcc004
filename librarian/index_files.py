"""The store index as files: the root ``index.json`` and one shard per package, written (one writer, sorted:
a shard whose package did not change is byte-identical) and read back, each entry checked on its own so that
a bad one poisons only itself. The values are :mod:`librarian.index`'s.

Root::

    {"schema": 1, "layout": {"name": "wheelhouse", "path": "{package}/..."},
     "packages": {"flash_attn": {"shard": "index/flash_attn.json", "wheels": 12, "sha256": "..."}}}

Shard ``index/flash_attn.json``::

    {"schema": 1, "package": "flash_attn", "wheels": [{"path": ..., "sha256": ..., "size": ...,
     "filename": ..., "version": "2.8.3+cu128torch2.9", "label": "cu128torch2.9", "tags": [...],
     "cell": {"package": ..., "sm": "sm_89", "torch": "2.9", "cuda": "12.8"}, "added": "...", "facts": {...}}]}
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from librarian.errors import BadInput, StoreError
from librarian.index import BadEntry, Index, IndexEntry, _field, shard_path
from librarian.jsonfile import MAX_JSON_BYTES, dump_json, finite, read_json_object, short
from librarian.layout import Layout, check_store_path

# 2: entries may record ``overrides`` (the publish flags that accepted a claim) and binaries ``extension``,
# ``no_kernels`` and ``torch_symbols`` (the one that binds a member to its torch line). Schema-1 indexes read as they are (an entry without the new fields overrode nothing),
# and a shard is written at 2 only when an entry of it uses them, so an older store stays byte-identical
# (and verify-clean) until something new is written to it; the root is at the highest of its shards.
# 3: an entry may record its ``variant``, the wheel-variant copy filed beside it (PEP 825); written at 3
# only in a shard that has one.
# 4: an entry may record its ``build`` (source, toolchain, seconds, runner); written at 4 only in a shard that has one.
SCHEMA = 4
READABLE_SCHEMAS = (1, 2, 3, 4)
_SCHEMA_2_BINARY_FIELDS = ("extension", "no_kernels", "torch_symbols")
ROOT = "index.json"
# Limits on what an index file may hold, so hostile content fails in one line instead of exhausting
# memory or the stack. A shard of 100,000 wheels with facts is some 200 MB.
MAX_INDEX_BYTES = MAX_JSON_BYTES


def _schema_of(entry: Any) -> int:
    """The schema an entry's JSON needs: 2 where it uses a field schema 1 did not have, 3 with a variant."""
    if not isinstance(entry, dict):
        return 1
    if "build" in entry:
        return 4
    if "variant" in entry:
        return 3
    facts = entry.get("facts")
    binaries = facts.get("binaries") if isinstance(facts, dict) else None
    rows = binaries if isinstance(binaries, list) else []
    new = (
        "overrides" in entry
        or "requires_torch" in entry
        or any(isinstance(b, dict) and any(k in b for k in _SCHEMA_2_BINARY_FIELDS) for b in rows)
    )
    return 2 if new else 1


def render_index(index: Index) -> dict[str, bytes]:
    """The index files to write: every shard and the root (``index.json``), by store path."""
    files: dict[str, bytes] = {}
    packages: dict[str, Any] = {}
    schemas: list[int] = []
    # Grouped in one pass: asking each package for its entries would scan the whole index per package.
    by_package: dict[str, list[IndexEntry]] = defaultdict(list)
    bad_by_package: dict[str, list[BadEntry]] = defaultdict(list)
    for entry in index.entries:
        by_package[entry.cell.package].append(entry)
    for bad in index.bad:
        bad_by_package[bad.package].append(bad)
    for package in sorted(by_package.keys() | bad_by_package.keys()):
        entries = sorted(by_package[package], key=lambda e: e.path)
        wheels = [e.to_json() for e in entries] + [b.raw for b in bad_by_package[package]]
        schema = max((_schema_of(w) for w in wheels), default=1)
        schemas.append(schema)
        shard = {"schema": schema, "package": package, "wheels": wheels}
        body = dump_json(shard)
        path = shard_path(package)
        files[path] = body
        packages[package] = {
            "shard": path,
            "wheels": len(wheels),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    root = {
        "schema": max(schemas, default=1),
        "layout": {"name": index.layout.name, "path": index.layout.path},
        "packages": packages,
    }
    files[ROOT] = dump_json(root)
    return files


@dataclass(frozen=True, slots=True)
class RootIndex:
    """The parsed root ``index.json``: the layout and where each package's shard is.

    Each package's ``sha256`` in the file (of its shard as rendered) is written for readers that fetch
    shards from a plain mirror, and not read back here: a shard edited by hand is read entry by entry (a bad
    entry poisons only itself), and ``verify`` names it out of date with the index by rendering it again.
    """

    layout: Layout
    shards: Mapping[str, str]  # package -> shard path


def load_json(text: bytes, source: str) -> dict[str, Any]:
    """An index file's JSON object, checked against its size and schema; StoreError naming ``source``."""
    return read_json_object(text, source, "index", READABLE_SCHEMAS)


def parse_root(text: bytes, source: str = ROOT) -> RootIndex:
    """Parse the root index."""
    data = load_json(text, source)
    try:
        layout_data = _field(data, "layout", dict)
        layout = Layout(_field(layout_data, "name", str), _field(layout_data, "path", str))
        packages = _field(data, "packages", dict)
        shards: dict[str, str] = {}
        for k, v in packages.items():
            if not isinstance(v, dict):
                raise TypeError(f"package {k!r} is a JSON {type(v).__name__}, expected object")
            shards[k] = _field(v, "shard", str)
    except (KeyError, TypeError, ValueError, AttributeError, BadInput) as e:
        raise StoreError(f"{source}: malformed root index ({short(e)})") from e
    for package, path in shards.items():
        try:
            expected = shard_path(package)
        except BadInput as e:
            raise StoreError(f"{source}: malformed root index ({e})") from e
        if path != expected:
            raise StoreError(f"{source}: shard of {package!r} at unexpected path {path!r}")
    return RootIndex(layout, shards)


def parse_shard(
    text: bytes, source: str, package: str
) -> tuple[tuple[IndexEntry, ...], tuple[BadEntry, ...]]:
    """Parse one package shard: its entries, and those that fail their checks (each poisons only itself).

    A shard that is not JSON, or has no list of wheels, is refused whole. An entry that names another
    package's wheel is bad here too: a shard speaks for its own package only.
    """
    data = load_json(text, source)
    wheels = data.get("wheels")
    if not isinstance(wheels, list):
        raise StoreError(f"{source}: malformed shard (no wheels list)")
    entries: list[IndexEntry] = []
    bad: list[BadEntry] = []
    for i, w in enumerate(wheels):
        try:
            entry = IndexEntry.from_json(w, f"{source}: wheels[{i}]" if not isinstance(w, dict) else source)
            if entry.cell.package != package:
                raise StoreError(
                    f"{source}: index entry of package {entry.cell.package} in the shard of {package}"
                )
        except StoreError as e:
            path = w.get("path") if isinstance(w, dict) else None
            named = path if isinstance(path, str) and _safe_path(path) else None
            problem = str(e).removeprefix(f"{source}: ")
            if named is not None:  # the path is where the problem is named: not again inside it
                problem = problem.replace(f" {named[:300]!r}", "", 1)
            bad.append(BadEntry(package, named, problem, finite(w)))
            continue
        entries.append(entry)
    return tuple(entries), tuple(bad)


def _safe_path(path: str) -> bool:
    try:
        check_store_path(path)
    except BadInput:
        return False
    return len(path) <= 1024


def adopt_hint(location: str, wheels: int) -> str:
    """What to do about the ``wheels`` wheel files a store holds without an index."""
    return (
        f"{wheels} wheel file(s) there; 'librarian reindex --adopt --repo {location}' reads their bytes "
        "and takes them in"
    )
