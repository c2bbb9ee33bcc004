"""Stores: where wheels live. ``open_store`` picks one from the ``--repo`` value."""

from __future__ import annotations

from pathlib import Path

from librarian.stores.base import Store
from librarian.stores.local import LocalStore


def open_store(
    repo: str,
    *,
    create: bool = False,
    publishing: bool = False,
    license: str | None = None,
    install: str | None = None,
) -> Store:
    """A local directory, or a Hub dataset repo for ``hf://datasets/owner/name[@revision]`` or its web URL.

    Any other URL is bad input, and nothing is written. A store that does not exist is an error
    (exit 2) when it is read; only a publish makes one (``--create`` on the Hub; a local directory is
    made by its first publish).
    """
    if "://" in repo:
        # Lazy on purpose (start-up time, not a layer dodge): only Hub users pay for importing huggingface_hub.
        from librarian.stores.hub import HubStore

        return HubStore.from_url(repo, create=create, license=license, install=install)
    return LocalStore(Path(repo), may_create=publishing)
