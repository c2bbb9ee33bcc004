"""Hub store addresses: ``hf://datasets/OWNER/NAME[@REV]`` and the web URLs people copy from the browser."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from huggingface_hub import constants

from librarian.errors import BadInput

_NAME = r"[A-Za-z0-9][\w.-]*/[\w.-]+"
_HF_URL = re.compile(rf"hf://datasets/(?P<repo>{_NAME}?)(?:@(?P<rev>\S+?))?/?")
_WEB_PATH = re.compile(rf"/datasets/(?P<repo>{_NAME}?)(?:/tree/(?P<rev>[^/]+)(?:/.*)?)?/?")
HUB_HOSTS = ("huggingface.co", "hf.co", "www.huggingface.co")
USAGE = (
    "expected a directory, hf://datasets/OWNER/NAME[@REVISION] or https://huggingface.co/datasets/OWNER/NAME"
)


def _origin(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of a URL, without credentials."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.rsplit("@", 1)[-1].lower()


def public_endpoint(endpoint: str) -> str:
    """The endpoint without credentials (``https://user:pass@mirror`` -> ``https://mirror``)."""
    parts = urlsplit(endpoint)
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl().rstrip("/")


def parse_hub_address(text: str) -> tuple[str, str] | None:
    """``(repo_id, revision)`` for a Hub dataset address, ``None`` for a path; BadInput for another URL.

    Accepted: ``hf://datasets/OWNER/NAME[@REV]``, and ``https://huggingface.co/datasets/OWNER/NAME``
    (optionally ``/tree/REV``), the same under the configured endpoint (HF_ENDPOINT).
    """
    text = text.strip()
    if "://" not in text:
        return None
    if text.startswith("hf://"):
        m = _HF_URL.fullmatch(text)
        if m is None:
            raise BadInput(f"{text}: not a Hub dataset repo ({USAGE})")
        return m["repo"], m["rev"] or "main"
    scheme, host = _origin(text)
    known = {("https", h) for h in HUB_HOSTS} | {
        _origin(constants.ENDPOINT),
        _origin(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT),
    }
    m = _WEB_PATH.fullmatch(urlsplit(text).path) if (scheme, host) in known else None
    if m is None or urlsplit(text).query:
        raise BadInput(f"{text}: not a store address ({USAGE})")
    return m["repo"], unquote(m["rev"]) if m["rev"] else "main"
