"""What a build reads of its own making, for its record (:mod:`librarian.build_record`): the source's identity
(an sdist's sha256, a source tree's digest and its git checkout's URL, commit and dirtiness), the toolchain's
versions (nvcc, the host compiler, torch) and the runner (a CI job's URL, else the host's name).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from librarian.build_record import BuildRecord, Source, Toolchain, clean_url
from librarian.coords import format_version
from librarian.index import utc_stamp
from librarian.machine import TorchInfo
from librarian.ops.build.build_source import SOURCE_LEFT_OUT
from librarian.probe.toolchain import Nvcc
from librarian.safeio import sha256_file

TIMEOUT = 30.0  # seconds a version or git question may take
# A compiler's (or the kernel's) own words for what failed: ``x.cu(5): error: ...``, ``fatal error``, an
# nvcc killed for memory; pip's and setuptools' lines about the failure are not it.
_COMPILE_ERROR = re.compile(
    r"\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp)[:(]\d+.*\berror\b|\bfatal error\b|^\s*error: (?!subprocess)|"
    r"\bKilled\b|out of memory|nvcc fatal|ptxas fatal|ld: cannot find|undefined reference",
    re.IGNORECASE,
)
MAX_LOG_SCAN = 64 << 20  # bytes of a log read for its first compile error


def _ask(cmd: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """A command's output, or ``None`` where it fails or takes too long."""
    try:
        done = subprocess.run(cmd, cwd=cwd, env=None if env is None else dict(env), capture_output=True,
                              text=True, timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def tree_digest(folder: Path) -> str:
    """The sha256 of a source tree: every file's relative path and bytes' sha256 (a link: its target),
    sorted, read in pieces (memory does not grow with the files); what a build's copy leaves out (version
    control, earlier builds' output: :data:`SOURCE_LEFT_OUT`) is left out here too, so that the folder and its
    copy have one digest."""
    rows: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _left_out(d))
        files = [f for f in files if not _left_out(f)]
        for name in sorted(files) + [d for d in dirs if Path(root, d).is_symlink()]:
            path = Path(root, name)
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                rows.append(f"{rel} -> {os.readlink(path)}")
            elif path.is_file():
                rows.append(f"{rel} {sha256_file(path)}")
    return hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()


def _left_out(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in SOURCE_LEFT_OUT)


def source_of(spec: str, staged: str) -> Source:
    """The identity of what a build compiles: ``spec`` as the user gave it, ``staged`` what pip builds (a
    folder's copy, a downloaded sdist, or the requirement itself)."""
    given, path = Path(spec), Path(staged)
    if path.is_dir():
        source = Source("folder", given.resolve().name or "source", tree_digest(path))
        if given.is_dir() and (git := _git(given)) is not None:
            url, commit, dirty = git
            source = Source("folder", source.name, source.sha256, url, commit, dirty)
        return source
    if path.is_file():
        name = clean_url(spec) if urlsplit(spec).scheme in ("http", "https") else path.name
        return Source("sdist", name, sha256_file(path))
    return Source("requirement", clean_url(spec))


def _git(folder: Path) -> tuple[str, str, bool] | None:
    """A git checkout's remote URL (no credentials), HEAD commit and whether its tree differs from it."""
    commit = _ask(["git", "-C", str(folder), "rev-parse", "HEAD"])
    if commit is None or not re.fullmatch(r"[0-9a-f]{40,64}", commit.strip()):
        return None
    url = _ask(["git", "-C", str(folder), "config", "--get", "remote.origin.url"]) or ""
    status = _ask(["git", "-C", str(folder), "status", "--porcelain", "--", "."])  # this folder's tree
    return clean_url(url.strip()), commit.strip(), status is None or bool(status.strip())


def toolchain_of(nvcc: Nvcc | None, torch: TorchInfo | None, env: Mapping[str, str]) -> Toolchain:
    """The versions of what compiled (or was to compile) a build; ``""`` for what is not known."""
    nvcc_version = (
        (nvcc.version or format_version(nvcc.release)) if nvcc is not None else ""
    )  # read once, found
    compiler = (_ask([env.get("CXX") or "c++", "--version"], env=env) or "").strip().splitlines()
    cuda = format_version(torch.cuda) if torch is not None and torch.cuda else ""
    return Toolchain(
        nvcc_version, compiler[0][:200] if compiler else "", torch.version if torch else "", cuda
    )


def first_error(log: Path) -> str:
    """The first line of a build log that says what the compiler could not do, else ``""`` (read line by
    line, at most :data:`MAX_LOG_SCAN` bytes)."""
    read = 0
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                read += len(line)
                if read > MAX_LOG_SCAN:
                    break
                if _COMPILE_ERROR.search(line) and "error originates" not in line:
                    return line.strip()[:300]
    except OSError:
        pass
    return ""


def runner_of(env: Mapping[str, str] | None = None) -> str:
    """Where a build ran: the CI job's URL where the CI says it (GitHub Actions, GitLab, Buildkite), else
    this host's name."""
    e = os.environ if env is None else env
    if e.get("GITHUB_ACTIONS") == "true" and e.get("GITHUB_REPOSITORY") and e.get("GITHUB_RUN_ID"):
        server = e.get("GITHUB_SERVER_URL") or "https://github.com"
        return clean_url(f"{server}/{e['GITHUB_REPOSITORY']}/actions/runs/{e['GITHUB_RUN_ID']}")
    for key in ("CI_JOB_URL", "BUILDKITE_BUILD_URL"):
        if e.get(key):
            return clean_url(e[key])
    return socket.gethostname()[:200]


def now() -> str:
    """The current UTC time as the records write it (as index entries do)."""
    return utc_stamp()


def record_of(source: Source, toolchain: Toolchain, seconds: float, archs: int) -> BuildRecord:
    """A finished build's record (``archs`` GPU archs compiled), on this runner, now."""
    return BuildRecord(source, toolchain, round(seconds), runner_of(), now(), max(1, archs))
