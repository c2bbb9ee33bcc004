"""pytest fixtures that start a loophub and point huggingface_hub at it.

Register with ``pytest_plugins = ["tests.loophub.fixtures"]`` in ``tests/conftest.py``, or import the
fixtures into a test module.

Why env vars are not enough: huggingface_hub reads most of them once, at import, into
``huggingface_hub.constants`` (ENDPOINT, HF_HUB_DISABLE_XET, HF_HUB_ETAG_TIMEOUT, HF_HOME, ...), and the
module-level functions (``huggingface_hub.create_commit``, ``list_repo_tree``, ...) are bound methods of
one ``HfApi()`` built at import with the endpoint of that moment. So the fixture sets the env vars (for
subprocesses, e.g. the librarian CLI run with ``subprocess``) *and* monkeypatches the constants, the
URL template derived from ENDPOINT, and ``huggingface_hub.hf_api.api.endpoint`` (for this process).
Only ``HF_TOKEN`` is read afresh on every call. The default HTTP client has no timeout on API calls
(commit, repo_info, paths-info), so the fixture installs one with ``LOOPHUB_CLIENT_TIMEOUT``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .server import LoopHub

FAKE_TOKEN = "hf_loophubFakeToken0123456789abcdefXYZ"
PAGE_SIZE = 10  # small, so listings in tests cross pages and exercise the Link header
ETAG_TIMEOUT = 3  # HEAD of hf_hub_download (the retry after a failed HEAD uses a fixed 60 s)
DOWNLOAD_TIMEOUT = 5  # GET of hf_hub_download
LOOPHUB_CLIENT_TIMEOUT = 10.0  # every other call (the library default is none at all)
QUICK_RETRY_S = 0.01  # huggingface_hub's waits between retries, capped (its own are 1 s and more)


def point_client_at(
    url: str,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    token: str | None = FAKE_TOKEN,
    client_timeout: float = LOOPHUB_CLIENT_TIMEOUT,
) -> None:
    """Point huggingface_hub (this process and child processes) at ``url``; undone by ``monkeypatch``."""
    import httpx2
    from huggingface_hub import constants, hf_api
    from huggingface_hub.utils import _http

    cache = home / "hub"
    env = {
        "HF_ENDPOINT": url,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_ETAG_TIMEOUT": str(ETAG_TIMEOUT),
        "HF_HUB_DOWNLOAD_TIMEOUT": str(DOWNLOAD_TIMEOUT),
        "HF_TOKEN_PATH": str(home / "token"),
        # librarian's own retries of Hub reads: quick waits (10, 20, 40, 80 ms), so that tests of bursts
        # stay fast; how many tries and what is retried is the same as with the real waits
        "LIBRARIAN_HUB_BACKOFF": "0.01",
        # and of commits (re-plans after a 412, a transient failure, the jitter after a rate limit's wait)
        "LIBRARIAN_HUB_COMMIT_BACKOFF": "0.01",
        "LIBRARIAN_HUB_TIMEOUT": str(client_timeout),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(key, raising=False)
    if token is None:
        monkeypatch.delenv("HF_TOKEN", raising=False)
    else:
        monkeypatch.setenv("HF_TOKEN", token)

    patches: dict[str, Any] = {
        "ENDPOINT": url,
        "HUGGINGFACE_CO_URL_TEMPLATE": url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_XET": True,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_PROGRESS_BARS": True,
        "HF_HUB_DISABLE_UPDATE_CHECK": True,
        "HF_HUB_ETAG_TIMEOUT": ETAG_TIMEOUT,
        "HF_HUB_DOWNLOAD_TIMEOUT": DOWNLOAD_TIMEOUT,
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "AGENT_HARNESSES_PATH": str(home / ".agent_harnesses.json"),
    }
    for name, value in patches.items():
        monkeypatch.setattr(constants, name, value)
    monkeypatch.setattr(hf_api.api, "endpoint", url)
    # huggingface_hub's own retries (preupload, LFS batch and upload, tree pages) wait 1, 2, 4, 8 s, or a
    # 429's Retry-After + 1 s: this process waits at most QUICK_RETRY_S instead; what is retried is unchanged.
    monkeypatch.setattr(_http, "time", _QuickSleep)

    def factory() -> httpx2.Client:
        return httpx2.Client(
            event_hooks={"request": [_http.hf_request_event_hook]},
            follow_redirects=True,
            timeout=client_timeout,
        )

    _http.set_client_factory(factory)  # also closes the shared client, and its pooled sockets


class _QuickSleep:
    """Stands in for the ``time`` module in ``huggingface_hub.utils._http``, which uses only its ``sleep``."""

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, QUICK_RETRY_S))


def restore_client() -> None:
    """Put back huggingface_hub's default HTTP client (closing ours)."""
    from huggingface_hub.utils import _http

    _http.set_client_factory(_http.default_client_factory)


@pytest.fixture
def make_loophub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., LoopHub]]:
    """A factory: ``make_loophub(page_size=2, token=None, ...)`` -> a started hub the client points at.

    ``token`` (default FAKE_TOKEN, also put in HF_TOKEN) is required on writes; ``None`` turns auth off.
    Other keyword arguments go to :class:`LoopHub`. Only one hub per test is pointed at by the env.
    """
    hubs: list[LoopHub] = []

    def make(**kwargs: Any) -> LoopHub:
        kwargs.setdefault("page_size", PAGE_SIZE)
        kwargs.setdefault("token", FAKE_TOKEN)
        # LOOPHUB_LFS_TRANSFER=xet runs every Hub test against a repo answering the LFS batch call as a
        # Xet-backed one does (tests/test_hub_xet.py does so in the default suite). Tests that count LFS
        # uploads differ in that mode: the legacy uploader is given actions for stored objects too.
        kwargs.setdefault("lfs_batch_transfer", os.environ.get("LOOPHUB_LFS_TRANSFER", "basic"))
        hub = LoopHub(tmp_path / f"loophub-{len(hubs)}", **kwargs).start()
        hubs.append(hub)
        point_client_at(hub.url, tmp_path / "hf-home", monkeypatch, token=FAKE_TOKEN)
        return hub

    try:
        yield make
    finally:
        restore_client()
        for hub in hubs:
            hub.stop()


@pytest.fixture
def loophub(make_loophub: Callable[..., LoopHub]) -> LoopHub:
    """A started loophub (page size 10, writes need FAKE_TOKEN) with huggingface_hub pointed at it."""
    return make_loophub()
