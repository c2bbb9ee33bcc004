"""The stable-ABI table read from what torch released: for each torch line from the base on, the headers of
its first release's wheel (``X.Y.0``, the smallest of its wheels: the headers are the same on every
platform), fetched by range requests from a PEP 691 index page (PyPI's ``/simple/torch/`` by default; a
few hundred KB per release, never the wheel), parsed by :mod:`librarian.pytorch.shim_headers`.

``scripts/make_stable_abi.py`` writes the packaged table from it; ``librarian matrix refresh --shims
released`` the user's override, the day a release lands.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from librarian.coords import MajorMinor, format_version
from librarian.errors import BadInput
from librarian.pytorch.shim_headers import floors_of_releases, is_shim_header, release_declarations
from librarian.sources.http import Limits, read_page
from librarian.sources.remote_zip import remote_members

PYPI_TORCH = "https://pypi.org/simple/torch/"
BASE = (2, 9)  # the first line a stable-ABI build runs on: what its headers declare unguarded is "2.9"
_FIRST_RELEASE = re.compile(r"^torch-(\d+)\.(\d+)\.0-[^-]+-[^-]+-[^-]+\.whl$")  # torch-2.13.0-cp311-...


@dataclass(frozen=True, slots=True)
class ReleaseWheel:
    """The wheel a torch line's headers are read from: its name, where, and its sha256 (from the page)."""

    line: MajorMinor
    filename: str
    url: str
    sha256: str

    @property
    def source(self) -> str:
        return f"{self.filename} sha256={self.sha256}"


@dataclass(frozen=True, slots=True)
class ReleasedTable:
    """Each function's line, from the releases read, and each release's wheel."""

    since: dict[str, MajorMinor]
    wheels: tuple[ReleaseWheel, ...]

    @property
    def through(self) -> MajorMinor:
        return max(w.line for w in self.wheels)


def release_wheels(page: str, base: MajorMinor = BASE) -> list[ReleaseWheel]:
    """Pure: from a PEP 691 JSON page of torch, each line's first release (``X.Y.0``, no local label) from
    ``base`` on, by its smallest wheel."""
    try:
        files = json.loads(page)["files"]
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(f"not a PEP 691 JSON index page of torch ({e})") from e
    best: dict[MajorMinor, ReleaseWheel] = {}
    sizes: dict[MajorMinor, int] = {}
    for f in files:
        name, url = str(f.get("filename", "")), str(f.get("url", ""))
        m = _FIRST_RELEASE.match(name)
        sha = (f.get("hashes") or {}).get("sha256", "")
        if m is None or not url or f.get("yanked"):
            continue
        line = (int(m[1]), int(m[2]))
        size = int(f.get("size") or 1 << 62)
        if line >= base and size < sizes.get(line, 1 << 63):
            best[line], sizes[line] = ReleaseWheel(line, name, url, sha), size
    return [best[line] for line in sorted(best)]


def read_released(
    index: str = PYPI_TORCH, limits: Limits | None = None, say: Callable[[str], None] = lambda _: None
) -> ReleasedTable:
    """The table from every torch line's first release on ``index`` (a PEP 691 JSON page URL)."""
    from urllib.parse import urljoin

    limits = limits or Limits(timeout=60.0)
    page = read_page(index, limits, accept="application/vnd.pypi.simple.v1+json")
    wheels = release_wheels(page)
    if not wheels or wheels[0].line != BASE:
        raise BadInput(
            f"{index}: no torch {format_version(BASE)}.0 wheel listed: the table's base cannot be read"
        )
    releases = {}
    for wheel in wheels:
        headers = remote_members(urljoin(index, wheel.url), is_shim_header, limits)
        if not headers:
            raise BadInput(f"{wheel.filename}: no shim headers under torch/include: not a torch wheel")
        releases[wheel.line] = release_declarations(t.decode("utf-8", "replace") for t in headers.values())
        say(
            f"torch {format_version(wheel.line)}: {len(releases[wheel.line])} shim functions in {wheel.filename}"
        )
    return ReleasedTable(floors_of_releases(releases), tuple(wheels))
