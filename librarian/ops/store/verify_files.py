"""verify's checks of the files that travel with the wheels: each PEP 658 METADATA file and variant wheel
the index records (present, its bytes, and with ``deep`` a variant against its source), none orphaned; and
the generated catalogue (index shards, pages, ``variants.json``) exactly as the index renders it."""

from __future__ import annotations

from pathlib import Path

from librarian.catalogue import is_generated, render_catalogue
from librarian.errors import LibrarianError
from librarian.facts import WheelFacts
from librarian.index import Index, metadata_path
from librarian.ops.store.placement import Problem
from librarian.ops.store.reindex_repair import missing_metadata
from librarian.ops.store.variant_wheels import check_variant
from librarian.stores.base import LocalFiles, Store, StoredFile, sha256_stored
from librarian.variant_format import VARIANTS_DIR, is_variant_wheel_path
from librarian.variants import foreign_variants


def check_metadata_files(store: Store, index: Index, files: dict[str, StoredFile]) -> list[Problem]:
    """PEP 658 files travel with their wheel: each indexed one present with its bytes, none left orphaned."""
    problems = [
        Problem(metadata_path(e.path), "the wheel's METADATA file (PEP 658) is missing (reindex restores it)")
        for e in missing_metadata(index, files.values())
    ]
    for entry in index.entries:
        path = entry.metadata_path
        stored = files.get(path) if path is not None and entry.path in files else None
        if path is None or stored is None:
            continue
        sha = stored.sha256 or (sha256_stored(store, path) if isinstance(store, LocalFiles) else None)
        if sha is not None and sha != entry.metadata_sha256:
            problems.append(Problem(path, "does not match the METADATA the index records for its wheel"))
    for path in sorted(files):
        if (
            path.endswith(".whl.metadata")
            and not is_generated(path)
            and path.removesuffix(".metadata") not in files
        ):
            problems.append(Problem(path, "METADATA file (PEP 658) of a wheel that is not in the store"))
    return problems


def check_variants(
    store: Store, index: Index, files: dict[str, StoredFile], deep: bool, judged: dict[str, WheelFacts]
) -> list[Problem]:
    """Variant wheels travel with their source: each recorded one present with its bytes (and, ``deep``,
    exactly its source's members, their data against its RECORD, and the properties the judgement of the
    source's bytes, ``judged``, gives); none left orphaned."""
    problems = []
    recorded = set()
    foreign = foreign_variants(index.entries)
    for entry in index.entries:
        path = entry.variant_path
        if path is None or entry.variant is None:
            continue
        if entry.path in foreign:  # not checked as a variant: it may be another wheel's path
            problems.append(Problem(entry.path, f"the index entry is bent: {foreign[entry.path]}"))
            continue
        recorded.add(path)
        stored = files.get(path)
        if stored is None:
            if entry.path in files:
                problems.append(
                    Problem(path, "its variant wheel is missing (reindex --variants makes it again)")
                )
            continue
        sha = stored.sha256 or (sha256_stored(store, path) if isinstance(store, LocalFiles) else None)
        if sha is not None and sha != entry.variant.sha256:
            problems.append(Problem(path, "does not match the variant wheel the index records"))
            continue
        if deep and entry.path in files:
            try:
                with store.open(entry.path) as source, store.open(path) as variant:
                    found = check_variant(
                        entry, Path(source.name), Path(variant.name), judged.get(entry.path)
                    )
            except LibrarianError as e:
                found = [str(e)]
            problems.extend(Problem(path, f"not the variant of {entry.filename}: {p}") for p in found)
    for path in sorted(files):
        orphan = path not in recorded and not is_generated(path)
        if orphan and is_variant_wheel_path(path):
            problems.append(Problem(path, "a variant wheel no index entry records (gc leaves it; remove it)"))
    return problems


def check_catalogue(store: Store, index: Index, files: dict[str, StoredFile]) -> list[Problem]:
    if not index.entries and "index.json" not in files:
        return []
    problems = []
    expected = render_catalogue(index)
    for path, data in sorted(expected.items()):
        stored = files.get(path)
        if stored is None:
            problems.append(Problem(path, "generated file missing (publish or gc again to rebuild)"))
        elif stored.size != len(data) or store.read_file(path) != data:
            problems.append(Problem(path, "out of date with the index"))
    for path in sorted(files):  # variants' json and pages are generated from the index alone
        if path.startswith(f"{VARIANTS_DIR}/") and path not in expected:
            problems.append(
                Problem(path, "no index entry has a variant of this release (reindex removes it)")
            )
    return problems
