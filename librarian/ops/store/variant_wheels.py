"""Making a stored wheel's variant wheel (``publish --variants``, ``reindex --variants``) and checking one
(``verify --deep``): the properties from the judgement, the files from :mod:`librarian.variants`, the bytes
from :mod:`librarian.wheel.variant`."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from librarian.coords import Label, MajorMinor, WheelName
from librarian.demands import Properties, Wheel, properties
from librarian.facts import WheelFacts
from librarian.index import IndexEntry, VariantRef
from librarian.pytorch.matrix import load_matrix
from librarian.variant_format import NVIDIA, READ_SCHEMAS, SM_ARCH, VariantLabel
from librarian.variants import PropertyValues, variant_filename, variant_json
from librarian.wheel import build_digest, variant_problems, write_variant

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MadeVariant:
    """A variant wheel written to a local folder, ready to upload (once per build, whatever its cells)."""

    staged: Path
    ref: VariantRef


def torch_lines() -> tuple[MajorMinor, ...]:
    """The torch lines a stable-ABI build declares from its floor on: PyTorch's matrix (with its override)."""
    return load_matrix().torch_versions()


def properties_of(
    name: WheelName,
    facts: WheelFacts | None,
    requires_python: str | None,
    lines: tuple[MajorMinor, ...],
    filed_as: Label | None = None,
) -> Properties:
    """The judgement's variant properties of a build (the same in every cell it is filed under);
    ``filed_as``: the line its cell's path claims, where its filename carries no label."""
    spec = SpecifierSet(requires_python) if requires_python else None
    return properties(Wheel(name, facts, spec, filed_as=filed_as), lines)


def label_of(source: Path, values: PropertyValues) -> VariantLabel:
    """The label of the variant of ``source`` with ``values``: its GPU span and a digest of its members and
    properties (what makes it this build, never the cell it is filed in)."""
    return _label(build_digest(source), values)


def _label(digest: str, values: PropertyValues) -> VariantLabel:
    h = hashlib.sha256(digest.encode())
    h.update(json.dumps([[ns, f, sorted(v)] for ns, f, v in sorted(values)]).encode())
    sm = next((v for ns, f, v in values if (ns, f) == (NVIDIA, SM_ARCH)), ())
    return VariantLabel.of(sm, h.hexdigest())


def make_variant(
    source: Path,
    name: WheelName,
    facts: WheelFacts | None,
    package: str,
    requires_python: str | None,
    out_dir: Path,
    lines: tuple[MajorMinor, ...],
    filed_as: Label | None = None,
) -> MadeVariant | str:
    """The variant of ``source`` (a build of ``package``) written into ``out_dir``, or why it has none;
    ``filed_as``: the line its cell's path claims, where its filename carries no label."""
    if facts is None:
        return "its bytes were never read (reindex --refresh reads them)"
    props = properties_of(name, facts, requires_python, lines, filed_as)
    if (why := props.unsayable) is not None:
        return why
    for reason in props.left_out:
        log.info("%s: variant leaves out %s", name, reason)

    def named(digest: str) -> tuple[str, bytes]:
        label = _label(digest, props.values)
        return variant_filename(name, label), variant_json(label, props.values)

    written = write_variant(source, out_dir / package, named)  # the wheel opened once for both
    ref = VariantRef(written.path.name, written.sha256, written.size, props.values)
    return MadeVariant(written.path, ref)


def check_variant(
    entry: IndexEntry, source: Path, variant: Path, facts: WheelFacts | None = None
) -> list[str]:
    """How a stored variant wheel differs from what its source is (empty: it is exactly its variant): its
    label (the build's digest), its members and their data, and its properties against the judgement of the
    source's bytes (``facts``, as just read; else the entry's), which the index's record must say too."""
    assert entry.variant is not None
    ref = entry.variant
    judged = properties_of(
        entry.name, facts or entry.facts, entry.requires_python, torch_lines(), entry.cell.label
    )
    problems = []
    if sorted(judged.values) != sorted(ref.properties):
        problems.append(f"the index records other properties than the judgement of {entry.filename} gives")
    label = label_of(source, judged.values)
    if ref.filename != (own := variant_filename(entry.name, label)):
        problems.append(f"its name is not its build's: the variant of {entry.filename} is {own}")
    olds = [variant_json(label, judged.values, schema) for schema in READ_SCHEMAS[1:]]  # stores made before
    return problems + variant_problems(source, variant, variant_json(label, judged.values), *olds)
