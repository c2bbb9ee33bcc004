"""The installed distributions of an environment, as ``doctor --env`` judges them: each found by its
``*.dist-info`` in the target's site-packages, its files by its RECORD (each path must stay inside
site-packages), its native members by their names (``.so``, ``.pyd``, ``.dll``, ``.dylib``, ``.so.N``).

Every read is bounded: the dist-info files by :mod:`librarian.probe.dist_info`, RECORD's rows de-duplicated
and at most ``MAX_ROWS`` (``MAX_NATIVE`` of them native files), the problems said of one distribution at most ``MAX_SAID`` (then a count), the
walk of a distribution without RECORD at most ``MAX_WALK`` files. A RECORD row whose file is gone or has
another size says the distribution was edited or half-installed.
"""

from __future__ import annotations

import csv
import io
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from librarian.probe.dist_info import MAX_RECORD, declared_tops, read_text, requires_torch, wheel_tag
from librarian.safeio import input_problem, read_regular

NATIVE = re.compile(r"\.(so|pyd|dll|dylib)$|\.so\.\d[\d.]*$")
MAX_WALK = 50_000  # files looked at per distribution found without a RECORD
MAX_ROWS = 500_000  # RECORD rows per distribution (torch's has ~15,000)
MAX_NATIVE = 20_000  # native files named in one RECORD (torch has ~112): past it, a hostile RECORD
MAX_SAID = 20  # problems said of one distribution; the rest counted
SMALL = 1 << 20  # torch's own files up to this size are held to their sha256, the rest to their size
MAX_DISTS = 20_000  # dist-info folders per site-packages
# The CUDA libraries the nvidia-* wheels ship, by their base name (Linux sonames, Windows DLLs).
_CUDA_LIBRARY = re.compile(
    r"^(?:lib)?(cudart|cublasLt|cublas|cudnn[a-z_]*|cufftw?|curand|cusolverMg|cusolver|cusparseLt|cusparse|"
    r"nccl|nvrtc-builtins|nvrtc|nvJitLink|cupti|nvToolsExt|nvjpeg|npp[a-z]*|cufile)"
    r"(?:\.so(?:\.\d+)*|64_\d+(?:_\d+)?\.dll)$"
)


@dataclass(frozen=True, slots=True)
class Installed:
    """One installed distribution: its name, version, tag, where it is, its native files, what is off."""

    name: str
    version: str
    tag: str  # from its WHEEL (the first Tag line), else py3-none-any
    site: Path
    native: tuple[str, ...]  # paths relative to ``site``
    problems: tuple[str, ...] = ()  # its RECORD against the files: edited, half-installed, escaping
    requires_torch: str | None = None  # its METADATA's Requires-Dist on torch
    altered: tuple[str, ...] = ()  # torch only: its own files whose bytes are not its RECORD's (each why)

    @property
    def filename(self) -> str:
        """The wheel it was installed from, as a name the judgement reads its tags from."""
        return f"{self.name.replace('-', '_')}-{self.version}-{self.tag}.whl"


def site_dirs(paths: Iterable[str]) -> list[Path]:
    """The site-packages folders of an interpreter's ``sys.path``."""
    return [
        Path(p)
        for p in dict.fromkeys(paths)
        if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
    ]


def read_installed(sites: Sequence[Path]) -> list[Installed]:
    """Every distribution in ``sites`` (one per name: the first site wins, as for imports)."""
    found: dict[str, Installed] = {}
    for site in sites:
        infos = itertools.islice((p for p in site.glob("*.dist-info") if p.is_dir()), MAX_DISTS)
        for info in sorted(infos):
            name, _, version = info.name.removesuffix(".dist-info").rpartition("-")  # no "-" in a version
            key = canonicalize_name(name)
            if key in found:
                continue
            tag, bad_wheel = wheel_tag(info)
            wants, bad_metadata = requires_torch(info)
            dist = _read_one(site, info, name, version, tag)
            unread = tuple(p for p in (bad_wheel, bad_metadata) if p)
            found[key] = replace(dist, requires_torch=wants, problems=(*unread, *dist.problems))
    return second_copies(sorted(found.values(), key=lambda d: canonicalize_name(d.name)))


def _read_one(site: Path, info: Path, name: str, version: str, tag: str) -> Installed:
    text, problem = read_text(info, "RECORD", MAX_RECORD)
    if problem:
        return Installed(name, version, tag, site, (), (problem,))
    if text is None:
        return _without_record(site, info, name, version, tag)
    seen: set[str] = set()
    native: list[str] = []
    problems: list[str] = []
    root = os.path.realpath(site)
    for count, row in enumerate(csv.reader(io.StringIO(text, newline=""))):
        if count >= MAX_ROWS:
            return Installed(name, version, tag, site, (), (f"RECORD: over {MAX_ROWS} rows: not judged",))
        member = row[0] if row else ""
        # only native files are read (torch's RECORD has ~15,000 rows), each once
        if not member or member in seen or not NATIVE.search(member):
            continue
        seen.add(member)
        if len(seen) > MAX_NATIVE:
            return Installed(
                name, version, tag, site, (), (f"RECORD: over {MAX_NATIVE} native files: not judged",)
            )
        problem = _row_problem(root, site, member, row[2] if len(row) > 2 else "")
        if problem:
            problems.append(problem)
        if problem is None or problem.endswith("(edited?)"):
            native.append(member)
    altered = _altered(site, text) if canonicalize_name(name) == "torch" else ()
    return Installed(name, version, tag, site, tuple(native), _said(problems), altered=_said(list(altered)))


def torch_altered(sites: Sequence[Path]) -> tuple[str, tuple[str, ...]]:
    """The installed torch's version and its own files that are gone or not its RECORD's, in the first site
    that has torch (the one ``import torch`` finds); ``("", ())`` where there is no torch with a RECORD."""
    for site in sites:
        for info in itertools.islice(site.glob("torch-*.dist-info"), 10):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            text, _ = read_text(info, "RECORD", MAX_RECORD)
            if text is not None and name == "torch" and "-" not in version:
                return version, _altered(site, text)
    return "", ()


def _said(problems: list[str]) -> tuple[str, ...]:
    more = [f"and {len(problems) - MAX_SAID} more"] if len(problems) > MAX_SAID else []
    return tuple(problems[:MAX_SAID] + more)


def _altered(site: Path, record: str) -> tuple[str, ...]:
    """Each of torch's own files that is gone or whose bytes are not its RECORD's (the small ones by their
    sha256, the rest by their size): a wheel, a script or a hand that wrote over torch leaves it unable to
    import, whatever its libraries' judgement says. Torch's ~15,000 files, ~40 MB of them small: a second."""
    import hashlib

    from librarian.wheel import digest_field

    root = os.path.realpath(site)
    out: list[str] = []
    for row in itertools.islice(csv.reader(io.StringIO(record, newline="")), MAX_ROWS):
        if len(row) < 3 or not row[0] or not row[1].startswith("sha256=") or not row[2].isdigit():
            continue  # RECORD itself, .pyc files: no hash to hold them to
        full = os.path.realpath(os.path.join(site, row[0]))
        if os.path.commonpath([root, full]) != root:
            continue  # bin/torchrun and the like: outside site-packages by design
        try:
            size = os.stat(full).st_size
        except OSError:
            out.append(f"{row[0]}: gone")
            continue
        if size != int(row[2]):
            out.append(f"{row[0]}: {size} bytes, its RECORD says {row[2]}")
        elif size <= SMALL and not NATIVE.search(row[0]):
            try:
                data = read_regular(Path(full), SMALL)  # a FIFO or a device is refused by what it is
            except OSError:
                continue
            if digest_field(hashlib.sha256(data)) != row[1]:
                out.append(f"{row[0]}: its bytes are not its RECORD's")
    return tuple(out)


def _row_problem(root: str, site: Path, member: str, size: str) -> str | None:
    """What is off with one RECORD row's native file (it is read anyway only where its size is)."""
    full = os.path.realpath(os.path.join(site, member))
    if os.path.commonpath([root, full]) != root:  # scripts in bin/ are outside by design; no library
        return f"{member}: outside site-packages; not read"
    if problem := input_problem(Path(full)):
        return f"{member}: " + (
            "in RECORD but not installed (half-installed?)" if problem == "no such file" else problem
        )
    actual = os.stat(full).st_size
    if size.isdigit() and actual != int(size):
        return f"{member}: {actual} bytes, RECORD says {size} (edited?)"
    return None


def _without_record(site: Path, info: Path, name: str, version: str, tag: str) -> Installed:
    """A distribution with no RECORD (conda, or by hand): its native files found under the top-level names
    it declares (``top_level.txt``) or its own name, said so; symlinks are not followed, the walk bounded."""
    tops, source, unread = declared_tops(info, name)
    said = (unread,) if unread else ()
    root = os.path.realpath(site)
    native: list[str] = []
    seen = 0
    for top, modules in _tops_in(site, tops).items():
        folder = site / top
        walked: Iterator[tuple[str, list[str], list[str]]] = (
            os.walk(folder) if folder.is_dir() and not folder.is_symlink() else iter(())
        )
        single: tuple[str, list[str], list[str]] = (str(site), [], modules)  # _foo.cpython-311-....so
        for dirpath, _, files in itertools.chain([single], walked):  # lazily: the bound stops the walk
            for file in files:
                seen += 1
                if seen > MAX_WALK:
                    return Installed(name, version, tag, site, (), (*said,
                        f"no RECORD, and over {MAX_WALK} files under {', '.join(tops)}: not judged"))  # fmt: skip
                full = os.path.join(dirpath, file)
                if not NATIVE.search(file) or os.path.islink(full) or input_problem(Path(full)):
                    continue
                if os.path.commonpath([root, os.path.realpath(full)]) == root:
                    native.append(os.path.relpath(full, site).replace(os.sep, "/"))
    if not native:
        return Installed(name, version, tag, site, (), (*said,
            f"no RECORD (installed by conda or by hand), and no native files found through {source}: not judged"))  # fmt: skip
    note = f"no RECORD (installed by conda or by hand): its files found through {source}"
    return Installed(name, version, tag, site, tuple(sorted(set(native))), (*said, note))


def _tops_in(site: Path, tops: Sequence[str]) -> dict[str, list[str]]:
    """Each top-level name with the single-file modules of it in ``site`` (``_foo.cpython-311-...so``): one
    listing of the site, the names compared as names."""
    modules: dict[str, list[str]] = {top: [] for top in tops}
    try:
        with os.scandir(site) as entries:
            for entry in itertools.islice(entries, MAX_WALK):
                top = entry.name.split(".", 1)[0]
                if top in modules and "." in entry.name and entry.is_file(follow_symlinks=False):
                    modules[top].append(entry.name)
    except OSError:
        pass
    return modules


def second_copies(dists: Sequence[Installed]) -> list[Installed]:
    """Pure: ``dists`` with a problem line on each package that ships its own copy of a CUDA library an
    ``nvidia-*`` distribution also ships (two copies in one process: which one loads depends on the order)."""
    shipped: dict[str, tuple[str, str]] = {}  # library base -> (nvidia dist, its file)
    for d in dists:
        if canonicalize_name(d.name).startswith("nvidia-"):
            for member in d.native:
                if m := _CUDA_LIBRARY.match(member.rpartition("/")[2]):
                    shipped.setdefault(m[1], (d.name, member))
    out = []
    for d in dists:
        copies: dict[str, list[str]] = {}
        if not canonicalize_name(d.name).startswith("nvidia-"):
            for member in d.native:
                if (m := _CUDA_LIBRARY.match(member.rpartition("/")[2])) and m[1] in shipped:
                    copies.setdefault(m[1], []).append(member)
        extra = []
        for base, members in copies.items():
            owner, theirs = shipped[base]
            more = f" (and {len(members) - 1} more)" if len(members) > 1 else ""
            extra.append(
                f"{members[0]}{more}: a second copy of {base} beside {owner}'s {theirs} (one process loads "
                "one; which depends on the load order)"
            )
        out.append(replace(d, problems=(*d.problems, *extra)) if extra else d)
    return out
