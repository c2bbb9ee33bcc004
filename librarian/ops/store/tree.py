"""Index entries made from the tree's paths alone (no bytes read): a store with no index, ``reindex --adopt``.

Light on purpose: ``pull`` falls back on it and must not load the binary readers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from librarian.catalogue import is_generated
from librarian.index import Index, IndexEntry
from librarian.index_files import ROOT, adopt_hint
from librarian.layout import Layout
from librarian.ops.store.placement import check_placement
from librarian.stores.base import Store, StoredFile, read_index, sha256_stored
from librarian.variant_format import is_variant_wheel_path


def is_wheel(path: str) -> bool:
    """Whether a store path is a wheel (not one of librarian's own files, nor a variant wheel)."""
    return path.endswith(".whl") and not is_generated(path) and not is_variant_wheel_path(path)


def entries_from_tree(
    layout: Layout,
    files: Iterable[StoredFile],
    sha_of: Callable[[StoredFile], str],
    packages: Collection[str] | None = None,
) -> list[IndexEntry]:
    """Index entries for the wheels whose paths the layout parses (and whose filenames agree with them).

    ``sha_of`` supplies the hash the listing lacks. Facts are unknown without reading the bytes.
    """
    entries = []
    for f in files:
        if not is_wheel(f.path):
            continue
        parsed = layout.parse_path(f.path)
        if parsed is None or (packages is not None and parsed[0].package not in packages):
            continue
        if check_placement(layout, f.path):
            continue  # a misfiled wheel is verify's finding, not a candidate
        entries.append(IndexEntry(f.path, f.sha256 or sha_of(f), f.size, parsed[0]))
    return entries


def hasher(store: Store) -> Callable[[StoredFile], str]:
    """The sha256 of a stored file whose listing has none, read from the store."""

    def sha_of(f: StoredFile) -> str:
        # A directory's listing has no sha256, nor has a Hub file stored inline (not LFS): read the bytes.
        return sha256_stored(store, f.path)

    return sha_of


def read_index_or_tree(store: Store, default_layout: Layout, packages: Collection[str]) -> tuple[Index, str]:
    """The index of ``packages``; with no ``index.json``, entries made from the tree's paths and a note.

    The fallback lists the whole tree (what the index exists to avoid), so it says so.
    """
    if store.read_file(ROOT) is not None:
        return read_index(store, default_layout, packages), ""
    listing = store.list_files()
    entries = entries_from_tree(default_layout, listing.files, hasher(store), set(packages))
    index = Index(default_layout, tuple(sorted(entries, key=lambda e: e.path)))
    said = f"{store.location}: no index; listed the tree"
    if entries:
        said += f" (its wheels judged by their paths alone): {adopt_hint(store.location, len(entries))}"
    return index, said
