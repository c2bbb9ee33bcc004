"""The wheel links of an HTML page, read as pip reads a ``--find-links`` page or a PEP 503 project page:
every ``<a href>`` (relative ones against the page's URL, or its ``<base href>``), the hash a ``#sha256=``
fragment names, and ``data-requires-python``. Pure: text in, values out.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

# The hashes a link's fragment may name (PEP 503: ``#<hashname>=<hex>``) that librarian checks.
HASHES = ("sha256", "sha384", "sha512")
_HEX = re.compile(r"[0-9a-fA-F]+")


@dataclass(frozen=True, slots=True)
class Link:
    """One wheel a page links: where to fetch it (no fragment), its filename, and the hash the page gives."""

    url: str
    filename: str
    hash_name: str = ""  # "sha256", ... ("": the page gives none librarian checks)
    hash_value: str = ""
    requires_python: str = ""


class _Anchors(HTMLParser):
    """Each ``<a>``'s href and data-requires-python, and the first ``<base href>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[str, str]] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag == "a" and values.get("href"):
            self.anchors.append((values["href"], values.get("data-requires-python", "")))


def wheel_links(html: str, page_url: str) -> list[Link]:
    """Every distinct wheel (``.whl``) the page links, in page order; other links are not followed (pip
    does not follow them either), so a page cannot lead anywhere else."""
    parser = _Anchors()
    parser.feed(html)
    parser.close()
    base = urljoin(page_url, parser.base) if parser.base else page_url
    found: dict[str, Link] = {}
    for href, requires in parser.anchors:
        url = urljoin(base, href.strip())
        parts = urlsplit(url)
        filename = unquote(posixpath.basename(parts.path))
        if not filename.endswith(".whl") or parts.scheme not in ("http", "https", "file"):
            continue
        name, value = _hash_of(parts.fragment)
        plain = urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))
        found.setdefault(plain, Link(plain, filename, name, value, requires))
    return list(found.values())


def _hash_of(fragment: str) -> tuple[str, str]:
    """The (name, hex) a fragment names, where it is one librarian checks."""
    name, _, value = fragment.partition("=")
    name = name.lower()
    if name in HASHES and _HEX.fullmatch(value):
        return name, value.lower()
    return "", ""


def shown(url: str) -> str:
    """A URL as it may be printed: no user or password, no query (signed URLs carry their token there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "…" if parts.query else "", ""))
