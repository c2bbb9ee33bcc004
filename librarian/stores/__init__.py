"""Stores: where wheels live. ``open_store`` picks one from the ``--repo`` value by its scheme."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from librarian.errors import BadInput
from librarian.stores.base import Store
from librarian.stores.local import LocalStore
from librarian.stores.location import StoreLocation


@dataclass(frozen=True, slots=True)
class HubCard:
    """What the Hub store writes into its dataset card's front matter and block: a license, the line that
    installs librarian. Hub options: other stores have no card."""

    license: str | None = None
    install: str | None = None


def _hub(repo: str, create: bool, publishing: bool, card: HubCard) -> Store:
    # Lazy on purpose (start-up time, not a layer dodge): only Hub users pay for importing huggingface_hub.
    from librarian.stores.hub import HubStore

    return HubStore.from_url(repo, create=create, license=card.license, install=card.install)


def _local(repo: str, create: bool, publishing: bool, card: HubCard) -> Store:
    return LocalStore(Path(repo), may_create=publishing)


# A new store is one module and one row here: the scheme of the --repo value, and what opens it.
OPENERS: dict[str, Callable[[str, bool, bool, HubCard], Store]] = {
    "": _local,
    "hf": _hub,
    "https": _hub,  # the repo's web URL, as people copy it from the browser
    "http": _hub,  # a Hub under HF_ENDPOINT (a loopback one, a mirror)
}


def open_store(
    repo: str, *, create: bool = False, publishing: bool = False, card: HubCard | None = None
) -> Store:
    """A local directory, or a Hub dataset repo for ``hf://datasets/owner/name[@revision]`` or its web URL.

    Any other URL is bad input, and nothing is written. A store that does not exist is an error
    (exit 2) when it is read; only a publish makes one (``--create`` on the Hub; a local directory is
    made by its first publish).
    """
    scheme = StoreLocation.parse(repo).scheme
    opener = OPENERS.get(scheme.lower())
    if opener is None:
        known = ", ".join(f"{s}://" for s in OPENERS if s)
        raise BadInput(f"{repo}: no store for {scheme}:// (a folder, or {known})")
    return opener(repo, create, publishing, card or HubCard())
