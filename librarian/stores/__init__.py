"""Stores: where wheels live. ``open_store`` picks one from the ``--repo`` value."""

from __future__ import annotations

from pathlib import Path

from librarian.stores.base import Store
from librarian.stores.local import LocalStore

HUB_PREFIX = "hf://"


def open_store(repo: str, *, create: bool = False) -> Store:
    """A local directory, or a Hub dataset repo for ``hf://datasets/owner/name[@revision]``."""
    if repo.startswith(HUB_PREFIX):
        from librarian.stores.hub import HubStore  # only Hub users pay for importing huggingface_hub

        return HubStore.from_url(repo, create=create)
    return LocalStore(Path(repo))  # a local directory is always created on first publish
