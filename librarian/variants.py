"""Wheel variants as files (PEP 817 / PEP 825 drafts, as uv 0.13.9 reads them). Pure.

A store that makes variants files, once per build (however many cells it is filed under), a copy of the
wheel under its public version with a ``*.dist-info/variant.json`` and a filename with one more field, its
variant label (:class:`~librarian.variant_format.VariantLabel`), under ``variant-wheels/<package>/``; and under
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

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from librarian.coords import WheelName
from librarian.index import Index, IndexEntry
from librarian.variant_format import (
    NAMESPACES,
    PROVIDERS,
    READ_SCHEMAS,
    SCHEMA_URL,
    VARIANTS_DIR,
    VariantLabel,
    parse_label,
)

PropertyValues = Sequence[tuple[str, str, Sequence[str]]]  # (namespace, feature, values), as written


def variant_filename(name: WheelName, label: VariantLabel) -> str:
    """PEP 825's filename: the wheel's, at its public version, with the label as one more field."""
    build = f"-{name.build}" if name.build else ""
    return f"{name.distribution}-{name.version.public}{build}-{name.tag_text}-{label}.whl"


def _nested(properties: PropertyValues) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for namespace, feature, values in properties:
        out.setdefault(namespace, {})[feature] = list(values)
    return out


@dataclass(frozen=True, slots=True)
class VariantsDocument:
    """A ``variants.json`` (one release's) or a ``*.dist-info/variant.json`` (one wheel's): each label's
    properties, under the schema, providers and priorities uv 0.13.9 reads. Its one writer is :meth:`render`."""

    variants: Mapping[str, PropertyValues]

    def to_json(self, schema: str = SCHEMA_URL) -> dict[str, object]:
        return {
            "$schema": schema,
            "default-priorities": {"namespace": list(NAMESPACES)},
            "providers": {ns: dict(PROVIDERS[ns]) for ns in NAMESPACES},
            "variants": {label: _nested(props) for label, props in sorted(self.variants.items())},
        }

    def render(self, schema: str = SCHEMA_URL) -> bytes:
        return (json.dumps(self.to_json(schema), indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes) -> VariantsDocument:
        """The document ``data`` holds (ValueError or TypeError where it is not one this module writes)."""
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("$schema") not in READ_SCHEMAS:
            raise ValueError(f"not a variants document of schema {SCHEMA_URL}")
        variants = doc.get("variants")
        if not isinstance(variants, dict):
            raise TypeError("'variants' is not an object")
        out: dict[str, PropertyValues] = {}
        for label, nested in variants.items():
            if parse_label(label) is None or not isinstance(nested, dict):
                raise ValueError(f"variant {label!r}: not a label with properties")
            props: list[tuple[str, str, tuple[str, ...]]] = []
            for namespace, features in nested.items():
                if namespace not in NAMESPACES or not isinstance(features, dict):
                    raise ValueError(f"variant {label}: unknown namespace {namespace!r}")
                for feature, values in features.items():
                    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                        raise ValueError(
                            f"variant {label}: {namespace} :: {feature} is not a list of strings"
                        )
                    props.append((namespace, feature, tuple(values)))
            out[label] = tuple(props)
        return cls(out)


def variant_json(label: VariantLabel, properties: PropertyValues, schema: str = SCHEMA_URL) -> bytes:
    """The ``*.dist-info/variant.json`` of one variant wheel (under ``schema``: one of READ_SCHEMAS)."""
    return VariantsDocument({str(label): properties}).render(schema)


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
    """Every ``variants.json`` and find-links page for the entries that have a variant, by store path: one
    link per variant wheel, however many cells its build is filed under."""
    import html  # imported where a page is rendered: reading the index renders none

    releases: dict[tuple[str, str], dict[str, PropertyValues]] = defaultdict(dict)
    links: dict[str, dict[str, str]] = defaultdict(dict)
    package_releases: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for e in entries:
        if e.variant is None or e.variant_path is None:
            continue
        releases[release_of(e)][e.variant.label] = e.variant.properties
        package_releases[e.cell.package].add(release_of(e))
        href = html.escape("../" + e.variant_path, quote=True)
        links[e.cell.package][e.variant_path] = (
            f'<a href="{href}#sha256={e.variant.sha256}">{html.escape(e.variant.filename)}</a><br>'
        )
    files: dict[str, bytes] = {}
    for (dist, version), variants in sorted(releases.items()):
        files[variants_json_path(dist, version)] = VariantsDocument(variants).render()
    for package, by_path in sorted(links.items()):
        jsons = sorted(
            variants_json_path(d, v).removeprefix(f"{VARIANTS_DIR}/") for d, v in package_releases[package]
        )
        anchors = [by_path[p] for p in sorted(by_path)] + [
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
    only where its label parses, its filename is the entry's wheel at its public version with that label
    (what :func:`variant_filename` prints), no entry names its path as a wheel or METADATA, and every entry
    naming it records the very same variant (one build's cells share one): a hostile index could otherwise
    make gc delete a kept wheel, or serve one."""
    named: dict[str, list[str]] = defaultdict(list)
    refs: dict[str, set[object]] = defaultdict(set)
    for e in entries:
        named[e.path].append(e.path)
        if e.metadata_path:
            named[e.metadata_path].append(e.path)
        if e.variant is not None and e.variant_path:
            refs[e.variant_path].add(e.variant)
    problems: dict[str, str] = {}
    for e in entries:
        if e.variant is None:
            continue
        label = parse_label(e.variant.label)
        own = variant_filename(e.name, label) if label is not None else None
        path = e.variant_path or ""
        if e.variant.filename != own:
            problems[e.path] = (
                f"its variant {e.variant.filename} is not its own ({own or 'no variant label'})"
            )
        elif named[path]:
            problems[e.path] = f"its variant {e.variant.filename} is a path {named[path][0]} names too"
        elif len(refs[path]) > 1:
            problems[e.path] = (
                f"its variant {e.variant.filename} is recorded with other bytes by another entry"
            )
    return problems


def variant_paths(index: Index) -> frozenset[str]:
    """The paths of every variant wheel the index records."""
    return frozenset(p for e in index.entries if (p := e.variant_path) is not None)


__all__ = [
    "PropertyValues",
    "VariantsDocument",
    "foreign_variants",
    "label_clash",
    "page_path",
    "release_of",
    "render_variants",
    "variant_filename",
    "variant_json",
    "variant_paths",
    "variants_json_path",
]
