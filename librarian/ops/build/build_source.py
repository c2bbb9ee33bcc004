"""What a build compiles, staged: a source folder copied, an sdist URL downloaded with a time-out, a
requirement built from its sdist; and the build requirements a source declares (torch left out)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from packaging.requirements import InvalidRequirement, Requirement

from librarian.compat import tomllib
from librarian.errors import BadInput, Unreachable
from librarian.ops.build.build_run import Say
from librarian.ops.build.build_sandbox import outward_links
from librarian.redact import mask

# What PEP 517 builds with when a package declares no [build-system] (setuptools' legacy setup.py).
PEP517_DEFAULT = ("setuptools>=40.8.0", "wheel")
# What a source folder's copy leaves out: version control and earlier builds' output (pip builds a folder
# in place, and a later build would reuse its build/ and *.egg-info).
SOURCE_LEFT_OUT = (".git", ".hg", ".svn", ".bzr", "build", "dist", "*.egg-info", ".eggs", "__pycache__",
                   ".tox", ".nox", ".venv", ".mypy_cache", ".pytest_cache")  # fmt: skip
SOURCE_TIMEOUT = 60.0  # seconds a --source download may go without a byte (LIBRARIAN_SOURCE_TIMEOUT)
SOURCE_DEADLINE = 1800.0  # seconds a --source download may take in all
_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def stage_source(spec: str, folder: Path, say: Say) -> list[str]:
    """What pip wheel builds, staged in ``folder``: a source folder copied (less VCS and build output: the
    user's tree is never written, and each build starts clean; one with a link out of it refused), an
    http(s) archive downloaded with a time-out, anything else as :func:`spec_arguments` says."""
    path = Path(spec)
    url = urlsplit(spec)
    if path.is_dir():
        if links := outward_links(path, SOURCE_LEFT_OUT):
            more = f" (and {len(links) - 1} more)" if len(links) > 1 else ""
            raise BadInput(
                f"{path}: {links[0]}{more}: a symbolic link out of the source; a build sees only its copy "
                "(put the file itself in the source)"
            )
        copy = folder / "source" / (path.resolve().name or "src")
        shutil.copytree(path, copy, symlinks=True, ignore=shutil.ignore_patterns(*SOURCE_LEFT_OUT))
        say(f"building a copy of {path.resolve()} (less {', '.join(SOURCE_LEFT_OUT[:6])}, ...)")
        return [str(copy)]
    if url.scheme in ("http", "https") and not path.exists():
        return [str(download_source(spec, folder / "source"))]
    return spec_arguments(spec)


def download_source(spec: str, into: Path) -> Path:
    """An sdist URL fetched into ``into``: each read bounded by LIBRARIAN_SOURCE_TIMEOUT, the whole by
    SOURCE_DEADLINE; a ``user:password@`` becomes Basic auth and is never printed."""
    url = urlsplit(spec)
    name = unquote(url.path.rstrip("/").rpartition("/")[2])
    if not name.endswith(_ARCHIVES) or "/" in name or "\\" in name or name.startswith("."):
        raise BadInput(f"{mask(spec)}: not the URL of an sdist (.tar.gz, .zip)")
    headers = {"User-Agent": "librarian"}
    if url.username is not None:
        pair = f"{unquote(url.username)}:{unquote(url.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    netloc = url.hostname or ""
    netloc += f":{url.port}" if url.port else ""
    clean = urlunsplit((url.scheme, netloc, url.path, url.query, ""))
    timeout = float(os.environ.get("LIBRARIAN_SOURCE_TIMEOUT") or SOURCE_TIMEOUT)
    deadline = time.monotonic() + max(timeout, SOURCE_DEADLINE)
    into.mkdir(parents=True, exist_ok=True)
    out = into / name
    try:
        request = urllib.request.Request(clean, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as r, open(out, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"not done after {max(timeout, SOURCE_DEADLINE):.0f} s")
    except (OSError, urllib.error.URLError, ValueError) as e:
        why = getattr(e, "reason", None) or e
        if isinstance(why, TimeoutError) or "timed out" in str(why):
            why = f"no answer within {timeout:.0f} s (LIBRARIAN_SOURCE_TIMEOUT)"
        raise Unreachable(f"{mask(spec)}: cannot download the source ({mask(str(why))})") from None
    return out


def build_requirements(spec: str) -> list[str]:
    """The spec's ``[build-system] requires`` (a folder or an sdist), torch left out: it is the combo's.

    A requirement (``flash-attn==2.8.3``) is not downloaded to read them: it gets PEP 517's default.
    """
    text: str | None = None
    path = Path(spec)
    try:
        if path.is_dir() and (path / "pyproject.toml").is_file():
            text = (path / "pyproject.toml").read_text()
        elif path.is_file() and tarfile.is_tarfile(path):
            with tarfile.open(path) as tar:
                member = next(
                    (
                        m
                        for m in tar.getmembers()
                        if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")
                    ),
                    None,
                )
                f = tar.extractfile(member) if member is not None and member.size < 1 << 20 else None
                text = f.read().decode("utf-8", "replace") if f is not None else None
    except (OSError, tarfile.TarError) as e:
        raise BadInput(f"{spec}: cannot read it ({e})") from e
    if text is None:
        return list(PEP517_DEFAULT)
    try:
        system = tomllib.loads(text).get("build-system")
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{spec}: pyproject.toml is not valid TOML ({e})") from e
    if not isinstance(system, dict):  # no [build-system]: setuptools, as pip would build it
        return list(PEP517_DEFAULT)
    requires = system.get("requires", [])
    return [str(r) for r in requires if not re.match(r"\s*torch\b(?![-_.\w])", str(r))]


def build_tools(spec: str, ninja_on_path: bool) -> list[str]:
    """What the environment needs beside torch: the spec's build requirements, and ninja where none is on
    PATH (torch's cpp_extension compiles one file at a time without it, whatever MAX_JOBS says)."""
    return [*build_requirements(spec), *(() if ninja_on_path else ("ninja",))]


def spec_arguments(spec: str) -> list[str]:
    """What pip wheel takes: a path made absolute (pip runs elsewhere); a requirement built from its sdist
    (``--no-binary NAME``: never a wheel someone else built), a URL as it is."""
    path = Path(spec)
    if path.exists():
        return [str(path.resolve())]
    url = urlsplit(spec)
    # A URL pip fetches itself (https://host/..., git+https://..., file:///...); a one-letter scheme is a
    # Windows drive (C:/src).
    if len(url.scheme) > 1 and (url.netloc or url.path.startswith("/")):
        return [spec]
    try:
        name = Requirement(spec).name
    except InvalidRequirement as e:
        raise BadInput(f"{spec}: no such file or folder, and not a requirement (NAME==VERSION)") from e
    return ["--no-binary", name, spec]


def declared_name(spec: str) -> str | None:
    """The ``[project] name`` a source folder's pyproject.toml declares (what its build must make), else
    ``None`` (a setup.py says its name only when run)."""
    path = Path(spec) / "pyproject.toml"
    try:
        project = tomllib.loads(path.read_text()).get("project") if path.is_file() else None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = project.get("name") if isinstance(project, dict) else None
    return name if isinstance(name, str) and name else None
