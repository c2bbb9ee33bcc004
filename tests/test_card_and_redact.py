"""Pure parts of the Hub store (README: Stores): the shared dataset card, Hub addresses, and server text made safe to print."""

from __future__ import annotations

import pytest

from librarian.card import BEGIN, END, merge_card, render_card_block
from librarian.config import load_layout
from librarian.errors import BadInput
from librarian.index import Index
from librarian.redact import clean, register_secret
from librarian.stores.hub import parse_hub_address, public_endpoint
from tests.test_index import entry

REPO = "team/wheels"


def block(endpoint: str = "https://huggingface.co") -> str:
    return render_card_block(Index(load_layout()).with_entries([entry()]), REPO, endpoint)


def test_a_new_card_has_front_matter_and_the_block() -> None:
    card = merge_card(None, block(), REPO, "apache-2.0")
    front = card.split("---\n")[1]
    assert "viewer: false" in front and "license: apache-2.0" in front
    assert all(f"- {tag}" in front for tag in ("wheels", "cuda", "pytorch", "librarian"))
    assert card.count(BEGIN) == 1 and card.count(END) == 1
    assert merge_card(card, block(), REPO, "apache-2.0") == card  # stable: no commit when nothing changed


def test_text_outside_the_block_survives_and_their_front_matter_is_kept() -> None:
    theirs = (
        "---\nlicense: mit\ntags:\n- kernels\npretty_name: X\n---\n# Ours\n\nnotes\n\n"
        + BEGIN
        + "\nSTALE-BLOCK\n"
        + END
        + "\n\nfooter\n"
    )
    card = merge_card(theirs, block(), REPO)
    assert "# Ours\n\nnotes" in card and "footer" in card and "STALE-BLOCK" not in card
    assert "license: mit" in card and "pretty_name: X" in card and "- kernels" in card and "- wheels" in card
    assert "viewer: false" in card
    relicensed = merge_card(theirs, block(), REPO, "apache-2.0")
    assert "license: apache-2.0" in relicensed and "license: mit" not in relicensed


def test_a_card_without_markers_gets_the_block_appended_an_old_librarian_card_is_replaced() -> None:
    card = merge_card("# Hand-written\n\nkeep me\n", block(), REPO)
    assert card.index("keep me") < card.index(BEGIN)
    old = "---\ntags:\n- wheels\n---\n# x\n\nThis card is rewritten by every `librarian publish` and `librarian gc`.\n"
    assert "rewritten by every" not in merge_card(old, block(), REPO)


def test_the_card_never_carries_endpoint_credentials() -> None:
    endpoint = public_endpoint("https://user:s3cret@mirror.example/")
    assert endpoint == "https://mirror.example"
    text = block(endpoint)
    assert "s3cret" not in text and "https://mirror.example/datasets/team/wheels/resolve/main/pages/" in text
    assert text.index("pip install --no-deps") < text.index("uv pip install") < text.index("librarian pull")


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("hf://datasets/team/wheels", ("team/wheels", "main")),
        ("hf://datasets/team/wheels@dev", ("team/wheels", "dev")),
        ("https://huggingface.co/datasets/team/wheels", ("team/wheels", "main")),
        ("https://huggingface.co/datasets/team/wheels/", ("team/wheels", "main")),
        ("https://huggingface.co/datasets/team/wheels/tree/refs%2Fpr%2F1", ("team/wheels", "refs/pr/1")),
        ("https://hf.co/datasets/team/wheels/tree/v1/sub/dir", ("team/wheels", "v1")),
        ("./wheelhouse", None),
    ],
)
def test_hub_addresses(address: str, parsed: tuple[str, str] | None) -> None:
    assert parse_hub_address(address) == parsed


@pytest.mark.parametrize(
    "address",
    [
        "http://huggingface.co/datasets/a/b",
        "https://huggingface.co/a/b",
        "https://example.com/datasets/a/b",
        "hf://spaces/a/b",
        "ftp://x/y",
        "https://huggingface.co/datasets/a/b?x=1",
    ],
)
def test_other_urls_are_refused(address: str) -> None:
    with pytest.raises(BadInput, match="not a"):
        parse_hub_address(address)


def test_clean_masks_tokens_and_makes_one_short_line() -> None:
    register_secret("my-configured-secret")
    raw = (
        "denied: Authorization: Bearer hf_abcdefghijklmnop1234 my-configured-secret\nPK\x03\x04\x00\x00"
        + "z" * 5000
    )
    line = clean(raw)
    assert "\n" not in line and len(line) <= 300 and line.endswith("...")
    assert (
        "hf_abcdefghijklmnop1234" not in line and "my-configured-secret" not in line and "Bearer ***" in line
    )
    assert "\x00" not in line and "\x03" not in line
    assert clean("fetch https://bob:pw@host/x failed") == "fetch https://***@host/x failed"


def test_the_card_has_a_pull_line_per_package_and_combo_and_the_install_setting() -> None:
    entries = [
        entry("flash_attn"),
        entry("flash_attn", label="cu130torch2.9"),
        entry("natten", sm="90"),
        entry("natten", sm="80"),
        entry("natten", sm="50"),  # Jetson Nano: the lowest number, not an example most readers can run
    ]
    index = Index(load_layout()).with_entries(entries)
    block = render_card_block(
        index, "me/wheels", install="pip install 'librarian-wheels @ git+https://example.org/l@v1'"
    )
    pulls = [line for line in block.splitlines() if line.startswith("librarian pull ")]
    combos = {(line.split()[2], line.split()[6], line.split()[8]) for line in pulls}
    assert {("flash_attn", "2.9", "12.8"), ("flash_attn", "2.9", "13.0"), ("natten", "2.9", "12.8")} <= combos
    assert any("natten --sm 80 " in line for line in pulls)  # the combo's most common GPU, not sm50
    assert not any("--sm 50 " in line for line in block.splitlines())
    assert "install it with `pip install 'librarian-wheels @ git+https://example.org/l@v1'`" in block
    assert "the publisher's `[tool.librarian] install` setting" in render_card_block(index, "me/wheels")
