"""What a change of the index does to a store's generated files: which to write, which to remove. Pure.

A store's generated files (the root ``index.json``, the shards ``index/<package>.json``, the pip pages
``pages/...`` and, on the Hub, librarian's block of the dataset card) follow from its index alone, so a
change is rendered here once, for both stores: the old index and the new one in, a :class:`Generated`
value out, which a store applies as it applies wheels (the local store by renames, root last; the Hub in
the commit piece that carries the index). Rendering itself is :mod:`librarian.catalogue`'s.

Normally the old files are what the old index renders. A rebuild (``reindex``'s repair, or a local store
finishing an interrupted change) compares with the generated files the tree actually holds instead, and
removes those the new index no longer renders.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from librarian.build_failure import BuildFailure
from librarian.card import CARD, merge_card, render_card_block
from librarian.catalogue import is_generated, render_catalogue
from librarian.index import Index
from librarian.index_files import ROOT, render_index
from librarian.pending import parse_pending_path


@dataclass(frozen=True, slots=True)
class CardSource:
    """What the dataset card needs besides the index: the card as the store holds it (``None``: none yet),
    the repo it describes, the public endpoint (no credentials: the card is public) and the license."""

    current: bytes | None
    repo_id: str
    endpoint: str = "https://huggingface.co"
    license: str | None = None
    install: str | None = None  # the one line that installs librarian ([tool.librarian] install)
    revision: str | None = None  # the commit the change is made on: the card's pinned example names it
    held: frozenset[str] = frozenset()  # the wheel paths that commit holds (what a pin to it can name)
    failures: tuple[BuildFailure, ...] = ()  # the failed builds the store remembers (the card lists them)


@dataclass(frozen=True, slots=True)
class Generated:
    """The generated files a change writes (path, bytes), the root ``index.json`` last, and those it removes."""

    writes: tuple[tuple[str, bytes], ...] = ()
    deletes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the change leaves every generated file as it is."""
        return not self.writes and not self.deletes


def plan_generated(
    old: Index,
    new: Index,
    *,
    tree: Mapping[str, bytes | None] | None = None,
    missing: Collection[str] = (),
    card: CardSource | None = None,
) -> Generated:
    """The generated files to write and to remove when the index goes from ``old`` to ``new``.

    ``tree``, for a rebuild: the generated files the tree holds now (``None`` bytes: there, but not read,
    because the new index does not render that path); they are compared with instead of what ``old``
    renders, and those ``new`` does not render are removed. ``missing``: paths ``old`` renders that the
    tree lacks (written even when unchanged). ``card``: bring the dataset card's block up to date.
    """
    after = render_catalogue(new)
    before: Mapping[str, bytes | None] = render_catalogue(old) if tree is None else tree
    absent = frozenset(missing)
    writes = {path: data for path, data in after.items() if before.get(path) != data or path in absent}
    card_bytes = render_card(new, card) if card is not None else None
    if card_bytes is not None:
        writes[CARD] = card_bytes
    # The root index last: until it is in place, readers see the old, consistent state.
    ordered = sorted(writes.items(), key=lambda kv: (kv[0] == ROOT, kv[0]))
    return Generated(tuple(ordered), tuple(sorted(set(before) - set(after))))


def rebuilds(path: str) -> bool:
    """Whether a rebuild compares the tree's file at ``path`` (a generated file; pending entries are not:
    they are reindex's input, and the change that merges them deletes them)."""
    return is_generated(path) and parse_pending_path(path) is None


def render_card(index: Index, card: CardSource) -> bytes | None:
    """The dataset card with librarian's block brought up to date (what people wrote around it is kept), or
    ``None`` when it needs no change or the index is empty (an empty store gets no card)."""
    if not index.entries:
        return None
    text = card.current.decode("utf-8", errors="replace") if card.current is not None else None
    kept = _pinned_before(text, index) if text is not None else None
    # The pin stays as it is while its wheel does; a card that needs no other change is not rewritten to add
    # one; one rewritten anyway pins to the commit it is written on.
    for revision, held in (
        [kept] if kept is not None else [(None, frozenset[str]()), (card.revision, card.held)]
    ):
        block = render_card_block(
            index, card.repo_id, card.endpoint, card.install, revision, held, card.failures
        )
        merged = merge_card(text, block, card.repo_id, card.license).encode()
        if merged == card.current:
            return None
    return merged


_PINNED = re.compile(r"@ \S+/resolve/([0-9a-f]{40})/(\S+) --hash=sha256:([0-9a-f]{64})")


def _pinned_before(text: str, index: Index) -> tuple[str, frozenset[str]] | None:
    """The commit and path of the card's hash-pinned example, where that wheel is still in the index with
    those bytes (a commit pinned once stays the card's pin: a change that changes nothing rewrites no card)."""
    from urllib.parse import unquote

    m = _PINNED.search(text)
    if m is None:
        return None
    path = unquote(m[2])
    entry = index.by_path().get(path)
    return (m[1], frozenset({path})) if entry is not None and entry.sha256 == m[3] else None


def root_is_stale(index: Index, held: bytes | None) -> bool:
    """Whether the root ``index.json`` a store holds is out of step with the shards ``index`` was read from."""
    return held is not None and held != render_index(index)[ROOT]
