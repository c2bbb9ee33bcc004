"""Which stored variant wheels are not their source's, as ``verify --deep`` judges (an extra member, other
``.so`` bytes, with the index's sha256 and size made to match): reindex makes each again from its source.

Judging one reads both wheels, so each pair judged faithful is remembered by what decides it (the source's
and the variant's sha256, the variant's name and properties, the torch lines known), under the user's cache:
a later reindex reads again only a pair that changed. A local store is judged on every reindex; a Hub store
where asked (``reindex --deep``: it downloads each wheel with a variant once).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from librarian.errors import LibrarianError
from librarian.index import Index, IndexEntry
from librarian.ops.store.variant_wheels import check_variant, torch_lines
from librarian.safeio import atomic_write, user_cache_dir
from librarian.stores.base import Store, StoredFile
from librarian.variants import foreign_variants

log = logging.getLogger(__name__)


def unfaithful_variants(store: Store, index: Index, files: Sequence[StoredFile]) -> frozenset[str]:
    """The entries (by path) whose stored variant has the bytes the index records but is not the variant of
    its source; each is said, with why. A pair that cannot be read is left to verify."""
    listed = {f.path: f for f in files}
    foreign = foreign_variants(index.entries)
    lines = [str(v) for v in torch_lines()]
    found = set()
    for entry in index.entries:
        where = entry.variant_path
        if entry.variant is None or where is None or entry.path in foreign or entry.path not in listed:
            continue
        stored = listed.get(where)
        if stored is None or stored.size != entry.variant.size:
            continue  # missing or other bytes: remade already (variants_wanted)
        mark = _checked_mark(entry, lines)
        if mark.exists():
            continue
        try:
            with store.open(entry.path) as source, store.open(where) as variant:
                problems = check_variant(entry, Path(source.name), Path(variant.name))
        except LibrarianError as e:
            log.info("%s: its variant not judged: %s", entry.path, e)
            continue
        if problems:
            log.warning("%s: not the variant of %s (%s); made again", where, entry.filename, problems[0])
            found.add(entry.path)
        else:
            _remember(mark)
    return frozenset(found)


def _checked_mark(entry: IndexEntry, lines: list[str]) -> Path:
    assert entry.variant is not None
    ref = entry.variant
    key = json.dumps([entry.sha256, ref.sha256, ref.filename, ref.properties, lines])
    return user_cache_dir() / "variant-checks" / hashlib.sha256(key.encode()).hexdigest()


def _remember(mark: Path) -> None:
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(mark, b"")
    except OSError as e:  # a cache: a read-only home only costs the next run the same reading
        log.debug("cannot remember %s: %s", mark, e)
