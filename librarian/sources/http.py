"""Fetching a page or a file over HTTP(S), bounded: a time-out on connecting and on every wait for bytes, a
floor on the rate (a server that trickles is a stall), a size bound, redirects followed by hand (at most
:data:`MAX_REDIRECTS`, a loop named as one, credentials never carried to another host), the page's hash
checked as the bytes arrive, and the file written to a temp name then renamed. Errors are one line that
names the URL as :func:`~librarian.sources.links.shown` prints it: never a user, password or query.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

from librarian.errors import BadInput, StoreError, Unreachable
from librarian.redact import clean
from librarian.safeio import atomic_output
from librarian.sources.links import shown

if TYPE_CHECKING:  # imported where a download starts: a command that fetches nothing never loads it
    import httpx2

MAX_REDIRECTS = 10
MAX_PAGE_BYTES = 64 << 20  # a page of links: PyTorch's biggest index page is a few MB


TIMEOUT = 60.0
MAX_BYTES = 8 << 30  # the biggest wheels people keep (flashinfer's cubins, torch itself) are under 4 GB


@dataclass(frozen=True, slots=True)
class Limits:
    """How long to wait and how much to take: ``timeout`` seconds for a connection or for any bytes at all,
    at least ``min_rate`` bytes in every ``timeout`` seconds after that, at most ``max_bytes`` in all."""

    timeout: float = TIMEOUT
    max_bytes: int = MAX_BYTES
    min_rate: int = 64 << 10

    @classmethod
    def from_env(cls) -> Limits:
        """``LIBRARIAN_DOWNLOAD_TIMEOUT`` (seconds) and ``LIBRARIAN_DOWNLOAD_MAX_BYTES``, where set."""
        try:
            timeout = float(os.environ.get("LIBRARIAN_DOWNLOAD_TIMEOUT") or TIMEOUT)
            most = int(os.environ.get("LIBRARIAN_DOWNLOAD_MAX_BYTES") or MAX_BYTES)
        except ValueError as e:
            raise BadInput(
                f"LIBRARIAN_DOWNLOAD_TIMEOUT / LIBRARIAN_DOWNLOAD_MAX_BYTES: not a number ({e})"
            ) from e
        if not (0 < timeout <= 3600 and most > 0):
            raise BadInput("LIBRARIAN_DOWNLOAD_TIMEOUT / LIBRARIAN_DOWNLOAD_MAX_BYTES: out of range")
        return cls(timeout, most)


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a download wrote: where, how many bytes, and their sha256."""

    path: Path
    size: int
    sha256: str


class HashMismatch(BadInput):
    """The bytes are not the ones the page names by their hash."""


def _client(limits: Limits) -> httpx2.Client:
    import httpx2

    return httpx2.Client(
        follow_redirects=False,
        timeout=httpx2.Timeout(limits.timeout, connect=min(limits.timeout, 30.0)),
        headers={"User-Agent": "librarian (wheel import)", "Accept": "text/html, */*;q=0.1"},
    )


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


@contextmanager
def _response(url: str, limits: Limits, headers: dict[str, str] | None = None) -> Iterator[httpx2.Response]:
    """The final response to GET ``url``, redirects followed by hand: a loop or more than MAX_REDIRECTS is an
    error, and the user and password of the URL go only to its own host."""
    import httpx2

    seen: set[str] = set()
    here = url
    with _client(limits) as client:
        for _ in range(MAX_REDIRECTS + 1):
            if here in seen:
                raise StoreError(f"{shown(url)}: a redirect loop (back to {shown(here)})")
            seen.add(here)
            try:
                response = client.send(client.build_request("GET", here, headers=headers), stream=True)
            except httpx2.TimeoutException as e:
                raise Unreachable(f"{shown(here)}: no answer within {limits.timeout:g} s") from e
            except httpx2.HTTPError as e:
                raise Unreachable(f"{shown(here)}: cannot be reached ({clean(str(e), 120)})") from e
            try:
                if response.is_redirect and "location" in response.headers:
                    target = urljoin(here, response.headers["location"])
                    if urlsplit(target).hostname != urlsplit(here).hostname:
                        target = _without_userinfo(target)  # credentials stay with their own host
                    here = target
                    continue
                if response.status_code >= 400:
                    error = (
                        Unreachable
                        if response.status_code >= 500 or response.status_code == 429
                        else StoreError
                    )
                    raise error(f"{shown(here)}: HTTP {response.status_code}")
                yield response
                return
            finally:
                response.close()
    raise StoreError(f"{shown(url)}: more than {MAX_REDIRECTS} redirects")


def _chunks(response: httpx2.Response, limits: Limits, url: str, most: int) -> Iterator[bytes]:
    """The body, bounded: over ``most`` bytes, or under the rate floor, is an error naming ``url``."""
    import httpx2

    length = response.headers.get("content-length")
    if length and length.isdigit() and int(length) > most:
        raise BadInput(f"{shown(url)}: {int(length):,} bytes, over the {most:,}-byte bound")
    total = 0
    window, in_window = time.monotonic(), 0
    try:
        # As they arrive (a trickle is seen), decoded (a compressed page is bounded as it inflates).
        for chunk in response.iter_bytes():
            total += len(chunk)
            in_window += len(chunk)
            if total > most:
                raise BadInput(f"{shown(url)}: over the {most:,}-byte bound")
            now = time.monotonic()
            if now - window > limits.timeout:
                if in_window < limits.min_rate:
                    raise Unreachable(f"{shown(url)}: stalled ({in_window} bytes in {now - window:.0f} s)")
                window, in_window = now, 0
            yield chunk
    except httpx2.TimeoutException as e:
        raise Unreachable(f"{shown(url)}: stalled (no bytes for {limits.timeout:g} s)") from e
    except httpx2.HTTPError as e:
        raise Unreachable(f"{shown(url)}: cut off ({clean(str(e), 120)})") from e


def read_range(url: str, start: int, length: int, limits: Limits) -> tuple[bytes, int]:
    """``length`` bytes of ``url`` from ``start`` (``start < 0``: its last ``-start`` bytes), and the whole
    file's size, by an HTTP range request; a server that answers with the whole file is refused (one line)."""
    wanted = f"bytes={start}" if start < 0 else f"bytes={start}-{start + length - 1}"
    with _response(url, limits, {"Range": wanted, "Accept-Encoding": "identity"}) as response:
        total = response.headers.get("content-range", "").rpartition("/")[2]
        if response.status_code != 206 or not total.isdigit():
            raise StoreError(
                f"{shown(url)}: the server does not answer range requests (HTTP {response.status_code})"
            )
        body = b"".join(_chunks(response, limits, url, min(length, limits.max_bytes)))
    return body, int(total)


def read_page(url: str, limits: Limits, accept: str | None = None) -> str:
    """The text of the page at ``url`` (at most :data:`MAX_PAGE_BYTES`); ``accept``: the type asked for."""
    with _response(url, limits, {"Accept": accept} if accept else None) as response:
        body = b"".join(_chunks(response, limits, url, min(MAX_PAGE_BYTES, limits.max_bytes)))
        charset = response.charset_encoding or "utf-8"
    return body.decode(charset, errors="replace")


def download(url: str, dest: Path, limits: Limits, hash_name: str = "", hash_value: str = "") -> Fetched:
    """Fetch ``url`` into ``dest`` (temp file, then rename), its sha256 taken as it arrives; where the page
    names a hash (``hash_name``), other bytes are refused and nothing is left at ``dest``."""
    sha = hashlib.sha256()
    named = hashlib.new(hash_name) if hash_name and hash_name != "sha256" else sha
    size = 0
    with _response(url, limits) as response, atomic_output(dest) as out:
        for chunk in _chunks(response, limits, url, limits.max_bytes):
            sha.update(chunk)
            if named is not sha:
                named.update(chunk)
            out.write(chunk)
            size += len(chunk)
        if hash_name and named.hexdigest() != hash_value:
            raise HashMismatch(
                f"{shown(url)}: its bytes' {hash_name} is {named.hexdigest()[:16]}…, the page says "
                f"{hash_value[:16]}…: not imported"
            )
    return Fetched(dest, size, sha.hexdigest())
