"""Read PyTorch's wheel index pages (``download.pytorch.org/whl/cu128/torch/``) into served combos.

Both forms of the simple repository API are read: PEP 503 HTML and PEP 691 JSON. Wheel filenames are
parsed by ``packaging``; only final ``torch`` releases with a ``+cuXYZ`` local version count (CPU, ROCm,
XPU and pre-release wheels are skipped). Pure: page text in, values out.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from librarian.coords import MajorMinor, parse_cuda
from librarian.errors import BadInput
from librarian.pytorch.releases import CPython, Platform

log = logging.getLogger(__name__)

PEP691_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True, slots=True)
class ServedCombo:
    """One (torch minor, CUDA line, CPython, platform) that a wheel on the index provides."""

    torch: MajorMinor
    cuda: MajorMinor
    python: CPython
    platform: Platform


@dataclass(frozen=True, slots=True)
class IndexScan:
    """What a page (or several) provided, and the wheel names skipped as not torch CUDA wheels."""

    combos: frozenset[ServedCombo]
    skipped: tuple[str, ...] = ()

    def __or__(self, other: IndexScan) -> IndexScan:
        return IndexScan(self.combos | other.combos, self.skipped + other.skipped)


class _AnchorCollector(HTMLParser):
    """Collects the file names of a PEP 503 page's ``<a>`` elements."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self._text: list[str] | None = None
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._text is not None:
            # PEP 503 makes the anchor text the filename; the href's last segment is the fallback,
            # since some mirrors write the URL as the text.
            text = "".join(self._text).strip()
            name = text if text.endswith(".whl") else _name_from_url(self._href or "")
            if name:
                self.names.append(name)
            self._text, self._href = None, None


def _name_from_url(url: str) -> str:
    # The index writes "+" as %2B in hrefs (torch-2.8.0%2Bcu128-...whl#sha256=...).
    return unquote(posixpath.basename(urlsplit(url).path))


def parse_html_page(text: str) -> tuple[str, ...]:
    """The file names a PEP 503 HTML page links to."""
    collector = _AnchorCollector()
    collector.feed(text)
    collector.close()
    return tuple(collector.names)


def parse_json_page(text: str, origin: str = "index page") -> tuple[str, ...]:
    """The file names a PEP 691 JSON page lists."""
    try:
        data = json.loads(text)
        files = data["files"]
        return tuple(str(f["filename"]) for f in files)
    except RecursionError as e:  # a page nested past the parser's depth: hostile, or broken
        raise BadInput(f"{origin}: not a PEP 691 project page (nested too deeply to read)") from e
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{origin}: not a PEP 691 project page ({e.__class__.__name__}: {e})") from e


def parse_index_page(
    text: str, content_type: str | None = None, origin: str = "index page"
) -> tuple[str, ...]:
    """The file names on a page, JSON if the content type (or the text itself) says so, else HTML."""
    if (content_type and "json" in content_type) or text.lstrip().startswith("{"):
        return parse_json_page(text, origin)
    return parse_html_page(text)


def served_combo_of(filename: str) -> tuple[ServedCombo, ...]:
    """The combos one wheel provides; empty for anything but a final torch ``+cuXYZ`` wheel."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return ()
    local = version.local or ""
    if name != "torch" or version.is_prerelease or version.is_devrelease or not local.startswith("cu"):
        return ()
    try:
        cuda = parse_cuda(local)
    except BadInput:
        return ()
    out = []
    for tag in tags:
        platform = Platform.from_wheel_tag(tag.platform)
        if platform is None or not tag.interpreter.startswith("cp"):
            continue
        # A free-threaded wheel says so in its ABI tag: cp313-cp313t.
        python = CPython.parse(tag.abi if tag.abi == tag.interpreter + "t" else tag.interpreter)
        out.append(ServedCombo((version.major, version.minor), cuda, python, platform))
    return tuple(out)


def scan_filenames(names: Iterable[str]) -> IndexScan:
    """The served combos of a list of file names, and the ``.whl`` names that gave none."""
    combos: set[ServedCombo] = set()
    skipped: list[str] = []
    for name in names:
        if not name.endswith(".whl"):
            continue
        found = served_combo_of(name)
        if found:
            combos.update(found)
        else:
            skipped.append(name)
    if skipped:
        log.debug("skipped %d wheels that are not final torch CUDA wheels", len(skipped))
    return IndexScan(frozenset(combos), tuple(skipped))


def scan_page(text: str, content_type: str | None = None, origin: str = "index page") -> IndexScan:
    """Parse a page and scan its file names in one step."""
    return scan_filenames(parse_index_page(text, content_type, origin))
