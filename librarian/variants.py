"""Wheel variants as files (PEP 817 / PEP 825 drafts, as uv 0.13.9 reads them). Pure.

A store that makes variants files, beside each wheel, a copy of it under its public version with a
``*.dist-info/variant.json`` and a filename with one more field, its variant label; and under
``variants/`` one ``{name}-{version}-variants.json`` per release and a find-links page per package that
links both (uv needs the json *and* the wheels; the page gives it both from one URL, on a folder or the
Hub alike).

What uv 0.13.9 accepts, found by running it: the schema URL below (``peps/825/v0.1.1``); every namespace a
file uses declared under ``providers`` and listed, the same, in ``default-priorities.namespace``; the NVIDIA
provider by its plugin name (uv runs its own copy of it, vendored). It has no provider for
``abi_dependency``: it skips the declaration (``Skipping unsupported wheel variant provider``) and treats
every variant that uses the namespace as unsupported, so with uv 0.13.9 a torch-bound build is never
installed through its variant (safe: never the wrong torch), and a torch-free one is chosen by GPU alone.
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from librarian.coords import Cell, WheelName
from librarian.index import Index, IndexEntry

SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
VARIANTS_DIR = "variants"
VARIANT_JSON = "variant.json"
NAMESPACES = ("nvidia", "abi_dependency")  # priority order: the GPU first, then the torch line
PROVIDERS: Mapping[str, Mapping[str, object]] = {
    "nvidia": {
        "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
        "requires": ["nvidia-variant-provider"],
    },
    "abi_dependency": {"builtin": "abi_dependency"},
}
LABEL = re.compile(r"[0-9a-z_.]+")

Properties = Sequence[tuple[str, str, Sequence[str]]]


def label_for(cell: Cell) -> str:
    """The variant label of a cell's wheel: ``sm89.cu128torch2.9`` (what makes it other than its siblings)."""
    label = f"sm{cell.sm.sm}.{cell.label}".lower()
    if not LABEL.fullmatch(label):  # the layout's parts are checked; this says which rule broke
        raise ValueError(f"variant label {label!r} is not [0-9a-z_.]+")
    return label


def variant_filename(name: WheelName, label: str) -> str:
    """PEP 825's filename: the wheel's, at its public version, with the label as one more field."""
    build = f"-{name.build}" if name.build else ""
    return f"{name.distribution}-{name.version.public}{build}-{name.tag_text}-{label}.whl"


def is_variant_filename(filename: str) -> bool:
    """Whether a ``.whl`` name is a variant's: one field more than a wheel's (a build tag starts with a digit)."""
    parts = filename.removesuffix(".whl").split("-")
    return len(parts) == 7 or (len(parts) == 6 and not parts[2][:1].isdigit())


def _nested(properties: Properties) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for namespace, feature, values in properties:
        out.setdefault(namespace, {})[feature] = list(values)
    return out


def _document(variants: Mapping[str, Properties]) -> dict[str, object]:
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": list(NAMESPACES)},
        "providers": {ns: dict(PROVIDERS[ns]) for ns in NAMESPACES},
        "variants": {label: _nested(props) for label, props in sorted(variants.items())},
    }


def _dump(doc: object) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def variant_json(label: str, properties: Properties) -> bytes:
    """The ``*.dist-info/variant.json`` of one variant wheel."""
    return _dump(_document({label: properties}))


def release_of(entry: IndexEntry) -> tuple[str, str]:
    """(distribution as filed, public version): what one ``variants.json`` covers."""
    name = entry.name
    return name.distribution, str(name.version.public)


def variants_json_path(distribution: str, version: str) -> str:
    """``variants/flash_attn-2.8.3-variants.json``: the name uv's ``--find-links`` recognises."""
    return f"{VARIANTS_DIR}/{distribution}-{version}-variants.json"


def page_path(package: str) -> str:
    """The find-links page of one package's variants: ``variants/flash_attn.html``."""
    return f"{VARIANTS_DIR}/{package}.html"


def render_variants(entries: Iterable[IndexEntry]) -> dict[str, bytes]:
    """Every ``variants.json`` and find-links page for the entries that have a variant, by store path."""
    releases: dict[tuple[str, str], dict[str, Properties]] = defaultdict(dict)
    links: dict[str, list[str]] = defaultdict(list)
    package_releases: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for e in entries:
        if e.variant is None or e.variant_path is None:
            continue
        releases[release_of(e)][e.variant.label] = e.variant.properties
        package_releases[e.cell.package].add(release_of(e))
        href = html.escape("../" + e.variant_path, quote=True)
        links[e.cell.package].append(
            f'<a href="{href}#sha256={e.variant.sha256}">{html.escape(e.variant.filename)}</a><br>'
        )
    files: dict[str, bytes] = {}
    for (dist, version), variants in sorted(releases.items()):
        files[variants_json_path(dist, version)] = _dump(_document(variants))
    for package, anchors in sorted(links.items()):
        jsons = sorted(
            variants_json_path(d, v).removeprefix(f"{VARIANTS_DIR}/") for d, v in package_releases[package]
        )
        anchors = sorted(anchors) + [
            f'<a href="{html.escape(j, quote=True)}">{html.escape(j)}</a><br>' for j in jsons
        ]
        title = html.escape(f"{package} (wheel variants)")
        body = "\n".join(anchors)
        files[page_path(package)] = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n"
        ).encode()
    return files


def label_clash(entries: Iterable[IndexEntry], entry: IndexEntry) -> str | None:
    """Why ``entry``'s variant cannot join ``entries`` (``None``: it can): PEP 825 gives a label one set of
    properties per release, and another build in the same cell and release (another Python tag, say) may
    say other ones. uv reads both files, so the later build is filed without its variant."""
    if entry.variant is None:
        return None
    release = release_of(entry)
    for e in entries:
        if e.variant is None or e.path == entry.path or e.variant.label != entry.variant.label:
            continue
        if release_of(e) == release and e.variant.properties != entry.variant.properties:
            return f"variant label {entry.variant.label} already means other properties (in {e.filename})"
    return None


def foreign_variants(entries: Sequence[IndexEntry]) -> dict[str, str]:
    """Pure: each entry (by path) whose recorded variant is not its own, and why. A variant is its entry's
    only where its filename is the entry's wheel at its public version with one label field (what
    :func:`variant_filename` prints for that label) and no other entry names that path, as its wheel, its
    METADATA or its variant: a hostile index could otherwise make gc delete a kept wheel, or serve one."""
    named: dict[str, list[str]] = defaultdict(list)
    for e in entries:
        named[e.path].append(e.path)
        if e.metadata_path:
            named[e.metadata_path].append(e.path)
        if e.variant_path:
            named[e.variant_path].append(e.path)
    problems: dict[str, str] = {}
    for e in entries:
        if e.variant is None:
            continue
        own = variant_filename(e.name, e.variant.label) if LABEL.fullmatch(e.variant.label) else None
        if e.variant.filename != own:
            problems[e.path] = f"its variant {e.variant.filename} is not its own ({own or 'no label'})"
        elif others := [p for p in named[e.variant_path or ""] if p != e.path]:
            problems[e.path] = f"its variant {e.variant.filename} is a path {others[0]} names too"
    return problems


def variant_paths(index: Index) -> frozenset[str]:
    """The paths of every variant wheel the index records."""
    return frozenset(p for e in index.entries if (p := e.variant_path) is not None)


__all__ = [
    "LABEL",
    "NAMESPACES",
    "PROVIDERS",
    "SCHEMA_URL",
    "VARIANTS_DIR",
    "VARIANT_JSON",
    "foreign_variants",
    "is_variant_filename",
    "label_clash",
    "label_for",
    "page_path",
    "release_of",
    "render_variants",
    "variant_filename",
    "variant_json",
    "variant_paths",
    "variants_json_path",
]
