"""Detect what a build runs with on this machine: nvcc (its release and toolkit), the memory and cores
MAX_JOBS is sized by, and the host's OS and CPU (a build makes wheels for the host's platform only).

Probes of the machine, as the rest of :mod:`librarian.probe`; the build's policy is :mod:`librarian.ops`'.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from librarian.coords import MajorMinor, format_version
from librarian.errors import BadInput
from librarian.platforms import canonical_cpu

_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")
_NVCC_VERSION = re.compile(r"\bV(\d+\.\d+\.\d+)")


@dataclass(frozen=True, slots=True)
class Nvcc:
    """The nvcc a build uses, where it was found (``CUDA_HOME``, ``PATH``) and its CUDA release."""

    path: str
    source: str
    release: MajorMinor
    home: str = ""  # the toolkit's root (CUDA_HOME for the build): nvcc's own, where a wrapper script points
    version: str = ""  # its full version (``13.0.88``), where it said one: a build record's

    @property
    def toolkit(self) -> str:
        """The toolkit's root: what nvcc said of itself, else the folder above its ``bin``."""
        return self.home or str(Path(self.path).resolve().parent.parent)

    def __str__(self) -> str:
        return f"nvcc {format_version(self.release)} ({self.source}: {self.path})"


def parse_nvcc_home(text: str) -> str | None:
    """The toolkit root from ``nvcc --dryrun``'s ``#$ _HERE_=/usr/local/cuda-13.0/bin`` (a wrapper script on
    PATH, ``/usr/local/bin/nvcc``, hides it: its folder above is no toolkit)."""
    m = re.search(r"^#\$ _HERE_=(.+)$", text, re.MULTILINE)
    return str(Path(m[1].strip()).parent) if m else None


def parse_nvcc_release(text: str) -> MajorMinor | None:
    """``Cuda compilation tools, release 12.8, V12.8.93`` -> (12, 8); None when nvcc said no such line."""
    m = _NVCC_RELEASE.search(text)
    return (int(m[1]), int(m[2])) if m else None


def find_nvcc(environ: Mapping[str, str] | None = None) -> Nvcc:
    """nvcc from ``CUDA_HOME`` (or ``CUDA_PATH``), else ``PATH``, with its release; BadInput when none."""
    env = os.environ if environ is None else environ
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if home := env.get(var):
            path, source = os.path.join(home, "bin", "nvcc"), var
            if not os.access(path, os.X_OK):
                raise BadInput(f"{var}={home}: has no bin/nvcc; point it at a CUDA toolkit")
            break
    else:
        found = shutil.which("nvcc", path=env.get("PATH"))
        if found is None:
            raise BadInput(
                "no nvcc found (CUDA_HOME unset, none on PATH): install a CUDA toolkit or set CUDA_HOME"
            )
        path, source = found, "PATH"
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BadInput(f"{path}: cannot run it ({e})") from e
    release = parse_nvcc_release(done.stdout)
    if release is None:
        raise BadInput(f"{path}: 'nvcc --version' names no CUDA release")
    full = _NVCC_VERSION.search(done.stdout)
    return Nvcc(path, source, release, _nvcc_home(path) or "", full[1] if full else "")


def _nvcc_home(path: str) -> str | None:
    """The toolkit root nvcc names for itself (``--dryrun`` compiles nothing), or None where it says none."""
    try:
        done = subprocess.run(
            [path, "--dryrun", "-E", "-x", "cu", os.devnull],
            capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_nvcc_home(done.stdout + done.stderr)


def detect_memory() -> int | None:
    """Bytes of memory this process may use: the machine's, or its cgroup's limit when that is lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total


def detect_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def detect_host() -> tuple[str, str]:
    """This machine's OS (``sys.platform``: ``linux``, ``win32``) and CPU in librarian's vocabulary."""
    return sys.platform, canonical_cpu(platform.machine())
