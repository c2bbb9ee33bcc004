"""Wheels from where people keep them, made local files for a publish: a file, a URL (``https://...``,
``hf://datasets/OWNER/NAME[@REV]/path.whl``), every wheel a page of links names (a find-links page, a PEP 503
project page, a release page: ``publish --from PAGE``), or every wheel another store holds (``--from
STORE``). Each is fetched with time-outs and a size bound, checked against the hash its page or index gives,
and comes with what its origin says of its torch and CUDA line: a wheelhouse path's cell (``.../sm89/
torch2.9-cu128/x.whl``), the claim a label would make. What cannot be fetched is one line each; the rest
are taken in. Credentials in URLs are never printed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from librarian import progress
from librarian.coords import Label, WheelName
from librarian.errors import BadInput, LibrarianError
from librarian.index_files import ROOT
from librarian.layout import Layout, check_path_part
from librarian.ops.store.placement import check_placement
from librarian.ops.store.tree import is_wheel
from librarian.pool import ordered_map
from librarian.safeio import atomic_output, input_problem, open_regular, read_regular, sha256_file
from librarian.sources.http import MAX_PAGE_BYTES, Limits, download, read_page
from librarian.sources.links import Link, shown, wheel_links
from librarian.stores import open_store
from librarian.stores.base import Store, read_index

log = logging.getLogger(__name__)

MAX_WHEELS = 2000  # wheels one page or store import takes; past it, --only narrows the choice
FETCHES = 4  # downloads at once
_HF_FILE = re.compile(r"hf://datasets/(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>[^/]+))?/(?P<path>.+\.whl)")


@dataclass(frozen=True, slots=True)
class Intake:
    """The wheels to publish as local files, what each one's origin says of its line, where each came from
    (as it may be printed), and what could not be taken in, one line each."""

    paths: tuple[Path, ...] = ()
    labels: dict[Path, Label] = field(default_factory=dict)
    origins: dict[Path, str] = field(default_factory=dict)
    failed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Wanted:
    """One wheel to fetch: from a URL (a page's hash with it) or a store path, into a folder of its own."""

    filename: str
    url: str = ""
    link: Link | None = None
    store: str = ""  # the store location it is read from
    path: str = ""  # its path in that store
    sha256: str = ""  # what its index says its bytes hash to
    label: Label | None = None


def is_remote(text: str) -> bool:
    """Whether an argument names a wheel by URL, not a file on this machine."""
    return urlsplit(text).scheme.lower() in ("http", "https", "hf")


def claimed_label(path: str, layout: Layout) -> Label | None:
    """The torch/CUDA line a wheelhouse path claims: its last components, read as the layout files wheels
    (``.../flash_attn/sm89/torch2.9-cu128/flash_attn-...whl``); ``None`` where they are no cell."""
    parts = [p for p in path.split("/") if p]
    for start in range(len(parts) - 1, -1, -1):
        parsed = layout.parse_path("/".join(parts[start:]))
        if parsed is not None:
            return parsed[0].label
    return None


def take_in(
    inputs: Sequence[str],
    sources: Sequence[str],
    only: Sequence[str],
    layout: Layout,
    folder: Path,
    limits: Limits | None = None,
) -> Intake:
    """``inputs`` (files and wheel URLs) and every wheel of ``sources`` (pages and stores) whose filename
    matches one of ``only`` (all, without), made local files under ``folder``."""
    limits = limits or Limits.from_env()
    locals_: list[Path] = []
    wanted: list[_Wanted] = []
    failed: list[str] = []
    for text in inputs:
        if not is_remote(text):
            locals_.append(Path(text))
        else:
            try:
                wanted.append(_named(text, layout))
            except LibrarianError as e:
                failed.append(str(e))
    for source in sources:
        try:
            found = _listed(source, layout, limits)
        except LibrarianError as e:
            failed.append(str(e))
            continue
        chosen = [w for w in found if not only or any(fnmatch.fnmatch(w.filename, p) for p in only)]
        if len(chosen) > MAX_WHEELS:
            failed.append(
                f"{_said(source)}: {len(chosen):,} wheels, more than the {MAX_WHEELS:,} one import takes: "
                "narrow it with --only PATTERN (e.g. 'flash_attn-2.8.3*cp312*')"
            )
            continue
        if not chosen:
            failed.append(f"{_said(source)}: no wheel" + (f" matching {' '.join(only)}" if only else ""))
        wanted += chosen
    fetched = _fetch_all(wanted, folder, limits)
    paths, labels, origins = list(locals_), {}, {}
    for want, got in zip(wanted, fetched, strict=True):
        if isinstance(got, str):
            failed.append(got)
            continue
        paths.append(got)
        origins[got] = _said(want.url) if want.url else f"{want.store}/{want.path}"
        if want.label is not None:
            labels[got] = want.label
    return Intake(tuple(paths), labels, origins, tuple(failed))


def _said(text: str) -> str:
    return shown(text) if "://" in text else text


def _named(text: str, layout: Layout) -> _Wanted:
    """A wheel named by URL: its filename checked, and the line its path claims."""
    if text.startswith("hf://"):
        m = _HF_FILE.fullmatch(text)
        if m is None:
            raise BadInput(
                f"{shown(text)}: not a wheel in a Hub dataset (hf://datasets/OWNER/NAME[@REV]/path.whl)"
            )
        location = f"hf://datasets/{m['repo']}" + (f"@{m['rev']}" if m["rev"] else "")
        return _Wanted(
            _filename(m["path"], text), store=location, path=m["path"], label=claimed_label(m["path"], layout)
        )
    path = urlsplit(text).path
    if not path.endswith(".whl"):
        raise BadInput(f"{shown(text)}: not a wheel's URL (its path ends in no .whl; a page goes to --from)")
    return _Wanted(_filename(path, text), url=text, label=claimed_label(unquote(path), layout))


def _filename(path: str, url: str) -> str:
    """The wheel's filename, the last part of its URL's path; one that would leave its folder is refused."""
    name = unquote(path.rsplit("/", 1)[-1])
    try:
        check_path_part(name, "wheel filename")
        WheelName.parse(name)
    except LibrarianError as e:
        raise BadInput(f"{shown(url)}: {str(e).split(': ', 1)[-1]}") from e
    return name


def _listed(source: str, layout: Layout, limits: Limits) -> list[_Wanted]:
    """The wheels a ``--from`` source names: a page's links (a URL, or an HTML file here) or a store's
    wheels (a folder, a Hub dataset by ``hf://`` or its web URL)."""
    scheme = urlsplit(source).scheme.lower() if "://" in source else ""
    if scheme in ("http", "https") and not _is_hub(source):
        return _page(read_page(source, limits), source, layout)
    if scheme == "" and Path(source).is_file():
        try:
            text = read_regular(Path(source), MAX_PAGE_BYTES).decode("utf-8", errors="replace")
        except OSError as e:
            raise BadInput(f"{source}: cannot be read ({e.strerror or e})") from e
        return _page(text, Path(source).resolve().as_uri(), layout)
    store = open_store(source)
    if store.read_file(ROOT) is not None:  # its index: every wheel with the sha256 to check
        return [
            _Wanted(e.filename, store=store.location, path=e.path, sha256=e.sha256, label=e.cell.label)
            for e in read_index(store, layout).entries
        ]
    found = []  # a store without an index: its tree, each wheel by the cell its path names
    for f in store.list_files().files:
        parsed = layout.parse_path(f.path) if is_wheel(f.path) else None
        if parsed is not None and not check_placement(layout, f.path):
            found.append(
                _Wanted(
                    parsed[1], store=store.location, path=f.path, sha256=f.sha256 or "", label=parsed[0].label
                )
            )
    return found


def _is_hub(url: str) -> bool:
    """Whether a web URL names a Hub dataset (a store), not a page of links."""
    from librarian.stores.hub_address import parse_hub_address  # here: it reads huggingface_hub's settings

    try:
        return parse_hub_address(url) is not None
    except BadInput:
        return False


def _page(html: str, url: str, layout: Layout) -> list[_Wanted]:
    out = []
    for link in wheel_links(html, url):
        try:
            out.append(_Wanted(_filename(urlsplit(link.url).path, link.url), url=link.url, link=link,
                               label=claimed_label(unquote(urlsplit(link.url).path), layout)))  # fmt: skip
        except LibrarianError as e:
            log.warning("%s", e)
    return out


def _fetch_all(wanted: Sequence[_Wanted], folder: Path, limits: Limits) -> list[Path | str]:
    """Each wanted wheel fetched into a folder of its own (two of one name never meet), a few at a time;
    a failure is its one line. A store is opened once, however many of its wheels are fetched."""
    stores = {w.store: open_store(w.store) for w in wanted if w.store}
    with progress.overall("download", len(wanted)) as bar:

        def fetch(item: tuple[int, _Wanted]) -> Path | str:
            n, want = item
            dest = folder / str(n) / want.filename
            try:
                if want.store:
                    return _from_store(stores[want.store], want, dest)
                if urlsplit(want.url).scheme == "file":  # a page on this machine links files beside it
                    return _from_file(want, dest, limits)
                link = want.link
                return download(
                    want.url, dest, limits, *((link.hash_name, link.hash_value) if link else ())
                ).path
            except LibrarianError as e:
                return str(e)
            finally:
                bar.advance()

        return list(ordered_map(fetch, list(enumerate(wanted)), FETCHES, "download"))


def _from_store(store: Store, want: _Wanted, dest: Path) -> Path:
    """A wheel of another store, checked against the sha256 its index records."""
    store.fetch(want.path, dest, want.sha256 or None)
    if want.sha256 and (sha := sha256_file(dest)) != want.sha256:
        dest.unlink(missing_ok=True)
        raise BadInput(
            f"{want.store}/{want.path}: its bytes' sha256 is {sha[:16]}…, its index says {want.sha256[:16]}…"
        )
    return dest


def _from_file(want: _Wanted, dest: Path, limits: Limits) -> Path:
    """A wheel a page on this machine links, copied (streamed, bounded) and checked against the page's hash."""
    local = Path(url2pathname(urlsplit(want.url).path))
    if problem := input_problem(local):
        raise BadInput(f"{local}: {problem}")
    link = want.link
    digest = hashlib.new(link.hash_name) if link is not None and link.hash_name else None
    with open_regular(local) as source, atomic_output(dest) as out:
        copied = 0
        while chunk := source.read(1 << 20):
            copied += len(chunk)
            if copied > limits.max_bytes:
                raise BadInput(f"{local}: over the {limits.max_bytes:,}-byte bound")
            if digest is not None:
                digest.update(chunk)
            out.write(chunk)
        if digest is not None and link is not None and digest.hexdigest() != link.hash_value:
            raise BadInput(
                f"{local}: its bytes' {link.hash_name} is not the one its page names: not imported"
            )
    return dest
