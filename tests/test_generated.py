"""The pure module that turns an index change into generated files to write and to remove."""

from __future__ import annotations

from librarian.card import BEGIN, CARD, END
from librarian.catalogue import render_catalogue
from librarian.config import load_layout
from librarian.generated import CardSource, Generated, plan_generated, rebuilds, render_card, root_is_stale
from librarian.index import Index
from librarian.index_files import ROOT
from tests.test_index import entry

REPO = "team/wheels"
EMPTY = Index(load_layout())


def written(generated: Generated) -> dict[str, bytes]:
    return dict(generated.writes)


def test_a_first_publish_writes_every_generated_file_root_last() -> None:
    new = EMPTY.with_entries([entry(), entry("natten", label="cu126torch2.8")])
    generated = plan_generated(EMPTY, new)
    assert written(generated) == render_catalogue(new)
    assert generated.writes[-1][0] == ROOT
    assert [p for p, _ in generated.writes[:-1]] == sorted(p for p in render_catalogue(new) if p != ROOT)
    assert generated.deletes == ()


def test_only_what_changed_is_written_and_what_is_gone_removed() -> None:
    old = EMPTY.with_entries([entry(), entry("natten", label="cu126torch2.8")])
    new = old.with_entries(removed=[entry("natten", label="cu126torch2.8").path]).with_entries(
        [entry(sm="90a")]
    )
    generated = plan_generated(old, new)
    before, after = render_catalogue(old), render_catalogue(new)
    assert written(generated) == {p: d for p, d in after.items() if before.get(p) != d}
    assert "index/flash_attn.json" in written(generated) and ROOT in written(generated)
    assert "index/natten.json" in generated.deletes
    assert set(generated.deletes) == set(before) - set(after)
    assert plan_generated(new, new).empty  # nothing changed: nothing written, nothing removed


def test_a_missing_file_is_written_although_unchanged() -> None:
    index = EMPTY.with_entries([entry()])
    generated = plan_generated(index, index, missing={"index/flash_attn.json"})
    assert written(generated) == {"index/flash_attn.json": render_catalogue(index)["index/flash_attn.json"]}


def test_a_rebuild_compares_with_the_tree_and_removes_stray_generated_files() -> None:
    index = EMPTY.with_entries([entry(), entry(sm="90a")])
    rendered = render_catalogue(index)
    page = next(p for p in rendered if p.startswith("pages/"))
    tree: dict[str, bytes | None] = {
        **rendered,
        "index/flash_attn.json": b"{stale}",  # out of date: rewritten
        "index/gone.json": None,  # a package the index no longer has: removed, never read
        "pages/sm75-torch2.1-cu118.html": b"<html>old</html>",
    }
    del tree[page]  # lost: written again
    # The old index says nothing here: a rebuild goes by the tree (old renders everything as it is).
    generated = plan_generated(index, index, tree=tree)
    assert written(generated) == {
        "index/flash_attn.json": rendered["index/flash_attn.json"],
        page: rendered[page],
    }
    assert generated.deletes == ("index/gone.json", "pages/sm75-torch2.1-cu118.html")


def test_a_rebuild_of_a_tree_in_step_changes_nothing() -> None:
    index = EMPTY.with_entries([entry()])
    assert plan_generated(EMPTY, index, tree=dict(render_catalogue(index))).empty


def test_the_card_block_is_merged_into_a_hand_written_card() -> None:
    index = EMPTY.with_entries([entry()])
    theirs = b"---\nlicense: mit\n---\n# Our wheels\n\nHand-written notes.\n"
    generated = plan_generated(
        EMPTY, index, card=CardSource(theirs, REPO, "https://hf.example", "apache-2.0")
    )
    card = written(generated)[CARD].decode()
    assert "# Our wheels\n\nHand-written notes." in card
    assert card.index(BEGIN) > card.index("Hand-written notes.") and END in card
    assert "https://hf.example/datasets/team/wheels/resolve/main/pages/" in card
    assert "license: apache-2.0" in card and "viewer: false" in card
    assert generated.writes[-1][0] == ROOT  # the card comes with the other files, the root still last
    # Brought up to date once, the card is left alone: no write when nothing in it changes.
    assert CARD not in written(
        plan_generated(index, index, card=CardSource(card.encode(), REPO, "https://hf.example", "apache-2.0"))
    )


def test_an_empty_index_gets_no_card() -> None:
    assert render_card(EMPTY, CardSource(None, REPO)) is None
    assert CARD not in written(
        plan_generated(EMPTY.with_entries([entry()]), EMPTY, card=CardSource(None, REPO))
    )


def test_root_is_stale_when_it_differs_from_the_index() -> None:
    index = EMPTY.with_entries([entry()])
    assert not root_is_stale(index, render_catalogue(index)[ROOT])
    assert not root_is_stale(index, None)  # no root yet: nothing out of step
    assert root_is_stale(index, render_catalogue(EMPTY)[ROOT])


def test_a_rebuild_compares_generated_files_only_never_pending_entries_or_wheels() -> None:
    assert rebuilds(ROOT) and rebuilds("index/flash_attn.json") and rebuilds("pages/sm89-torch2.9-cu128.html")
    assert not rebuilds(
        "index/pending/kern/sm89/torch2.8-cu128/kern-1.0-py3-none-any.whl.0123456789abcdef.json"
    )
    assert not rebuilds(entry().path) and not rebuilds(CARD)
