"""The C libraries of this machine: glibc's version and the newest ``GLIBCXX_`` its libstdc++ defines."""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from pathlib import Path

from librarian.coords import MajorMinor
from librarian.errors import BadBinary
from librarian.machine import Probed
from librarian.probe.nvidia import ProbeFailed, _run

log = logging.getLogger(__name__)

# --- C libraries ------------------------------------------------------------------------------------------


def detect_glibc(platform: str = sys.platform) -> Probed[MajorMinor]:
    """glibc's version from ``confstr``; unknown on musl, macOS and Windows (which have none to need)."""
    if platform in ("win32", "darwin", "cygwin"):
        return Probed.unknown(f"no glibc on {platform}")
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        text = ""
    if (version := parse_glibc_version(text)) is not None:
        return Probed.found(version, "confstr")
    return Probed.unknown("no glibc here (musl, macOS or Windows?); pass --glibc")


def parse_glibc_version(text: str) -> MajorMinor | None:
    """``glibc 2.35`` (what ``confstr("CS_GNU_LIBC_VERSION")`` says) as ``(2, 35)``; ``None`` for anything else."""
    m = re.fullmatch(r"glibc (\d+)\.(\d+).*", text)
    return (int(m[1]), int(m[2])) if m else None


_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
    "/lib",
)


def find_libstdcxx() -> Path | None:
    """The ``libstdc++.so.6`` this process would load: already mapped, else ``ldconfig -p``, else usual dirs."""
    try:
        maps = Path("/proc/self/maps").read_text()
        if m := re.search(r"(/\S*libstdc\+\+\.so\.6[\d.]*)$", maps, re.MULTILINE):
            return Path(m[1])
    except OSError:
        pass
    ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
    if ldconfig is not None:
        try:
            if m := re.search(r"libstdc\+\+\.so\.6 .*=> (\S+)", _run([ldconfig, "-p"])):
                return Path(m[1])
        except ProbeFailed as e:
            log.debug("ldconfig: %s", e)
    return next((p for d in _LIB_DIRS if (p := Path(d) / "libstdc++.so.6").exists()), None)


def read_version_definitions(path: Path) -> tuple[str, ...]:
    """The version names a shared library defines (``.gnu.version_d``): ``GLIBCXX_3.4.30``, ..."""
    with path.open("rb") as f:
        # Imported here, not at the top: start-up without the ELF reader when no library is read.
        from librarian.wheel import version_definitions

        return version_definitions(f)


def detect_glibcxx() -> Probed[tuple[int, ...]]:
    """The highest ``GLIBCXX_x.y.z`` that this machine's libstdc++ defines."""
    path = find_libstdcxx()
    if path is None:
        return Probed.unknown("libstdc++.so.6 not found")
    try:
        names = read_version_definitions(path)
    except (OSError, BadBinary) as e:
        return Probed.unknown(f"{path}: cannot read its version definitions ({e})")
    versions = [tuple(int(x) for x in n[8:].split(".")) for n in names if re.fullmatch(r"GLIBCXX_[\d.]+", n)]
    if not versions:
        return Probed.unknown(f"{path}: defines no GLIBCXX_ versions")
    return Probed.found(max(versions), str(path))
