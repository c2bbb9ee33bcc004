"""The interpreter librarian acts for: ``--python PATH``, else the active virtual environment, else its own.

librarian is a tool people keep once (pipx, ``uv tool install``) and point at many environments, as they do
uv and ``hf``. What a wheel must fit (interpreter tags, Requires-Python, the installed torch and its CUDA
line) is read from that *target* interpreter with one small probe run of it; torch is never imported.
``--python 3.12`` (a version, not a path) keeps meaning "resolve for CPython 3.12".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from packaging.tags import Tag, parse_tag

from librarian.errors import BadInput
from librarian.probe.libc import parse_glibc_version

PROBE_TIMEOUT = 60  # seconds: a cold interpreter on a slow network file system still starts well within it
MAX_PROBE_OUTPUT = 1 << 20  # bytes: the probe prints one JSON line of a few KB (sys.path and ~900 tags)

# Runs inside the target. Only the standard library is sure to be there; packaging's tags come from the
# target's own packaging or pip's vendored copy, which is what the target's pip itself would match by.
_PROBE = r"""
import json, os, platform, sys
tags = None
for mod in ("packaging.tags", "pip._vendor.packaging.tags"):
    try:
        tags = [str(t) for t in __import__(mod, fromlist=["sys_tags"]).sys_tags()]
        break
    except Exception:
        pass
try:
    libc = os.confstr("CS_GNU_LIBC_VERSION")
except (AttributeError, ValueError, OSError):
    libc = None
print(json.dumps({"version": list(sys.version_info[:3]), "implementation": sys.implementation.name,
                  "executable": sys.executable, "path": sys.path, "tags": tags,
                  "machine": platform.machine(), "platform": sys.platform, "libc": libc}))
"""


@dataclass(frozen=True, slots=True)
class Target:
    """The interpreter to act for, and how it was chosen (``--python``, ``VIRTUAL_ENV`` or librarian's own)."""

    executable: Path
    how: str

    @property
    def own(self) -> bool:
        """Whether it is the interpreter running librarian (then nothing needs to be run)."""
        return _same(self.executable, Path(sys.executable))

    def __str__(self) -> str:
        return f"{self.executable} ({self.how})"


def _same(a: Path, b: Path) -> bool:
    # Never resolve symlinks: every venv's python links to the same base interpreter. Two interpreters in
    # one bin folder (python, python3, python3.12) are one environment.
    a, b = Path(os.path.abspath(a)), Path(os.path.abspath(b))
    return a == b or a.parent == b.parent


def is_version(text: str) -> bool:
    """Whether ``--python`` names a version (``3.12``, ``312``, ``cp312``) rather than a path."""
    return re.fullmatch(r"(?:cp|py)?\d(?:\.?\d{1,2})?", text.strip().lower()) is not None


def _interpreter_in(venv: Path) -> Path | None:
    for rel in ("bin/python", "bin/python3", "Scripts/python.exe"):
        if (venv / rel).exists():
            return venv / rel
    return None


def find_target(python: str | None, environ: Mapping[str, str] | None = None) -> Target:
    """The target: ``--python PATH`` (an interpreter or a venv folder), else ``$VIRTUAL_ENV``, else our own."""
    env = os.environ if environ is None else environ
    if python is not None and not is_version(python):
        # Used as given, relative to the working directory, never looked up on PATH: "./python3" made a
        # str is "python3", which a process would look up (uv and pip take a path the same way).
        path = Path(os.path.abspath(Path(python).expanduser()))
        if path.is_dir():
            found = _interpreter_in(path)
            if found is None:
                raise BadInput(
                    f"--python {python}: a folder, but no virtual environment (no bin/python in it)"
                )
            return Target(found, "--python")
        if not path.exists():
            raise BadInput(f"--python {python}: no such interpreter or virtual environment")
        return Target(path, "--python")
    venv = env.get("VIRTUAL_ENV")
    if venv:
        found = _interpreter_in(Path(venv))
        if found is not None:
            return Target(found, "VIRTUAL_ENV")
    return Target(Path(sys.executable), "librarian's own interpreter")


@dataclass(frozen=True, slots=True)
class TargetFacts:
    """What the target interpreter said about itself."""

    version: tuple[int, int, int]
    implementation: str
    executable: str
    path: tuple[str, ...]  # its sys.path: where its torch is found
    tags: tuple[Tag, ...] | None  # None: neither packaging nor pip is installed there
    machine: str
    platform: str
    glibc: tuple[int, int] | None


def parse_probe(text: str, where: str) -> TargetFacts:
    """The probe's JSON line; BadInput naming ``where`` when it is not what the probe prints."""
    try:
        data = json.loads(text.strip().splitlines()[-1])
        version = tuple(int(x) for x in data["version"])
        tags = None if data.get("tags") is None else tuple(t for s in data["tags"] for t in parse_tag(s))
        return TargetFacts(
            (version[0], version[1], version[2]),
            str(data["implementation"]),
            str(data["executable"]),
            tuple(str(p) for p in data["path"]),
            tags,
            str(data["machine"]),
            str(data["platform"]),
            parse_glibc_version(str(data.get("libc") or "")),
        )
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise BadInput(f"{where}: did not answer librarian's probe as a Python interpreter ({e})") from e


def probe_target(target: Target) -> TargetFacts:
    """Run the target once to read its version, tags, sys.path, CPU and glibc (torch is not imported).

    Its output goes to temp files and only a bounded amount is read back: a "python" that prints without
    end costs disk for at most ``PROBE_TIMEOUT`` seconds, never memory.
    """
    exe = target.executable
    cmd = [str(exe), "-c", _PROBE]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            returncode = subprocess.run(
                cmd, stdout=out, stderr=err, timeout=PROBE_TIMEOUT, check=False, stdin=subprocess.DEVNULL
            ).returncode
        except subprocess.TimeoutExpired as e:  # its text quotes the command line, the probe's source with it
            raise BadInput(f"{exe}: did not answer librarian's probe within {PROBE_TIMEOUT} s") from e
        except OSError as e:
            raise BadInput(f"{exe}: cannot run it ({e.strerror or e})") from e
        if returncode != 0:
            last = (_tail(err, 4096).strip().splitlines() or ["no output"])[-1]
            raise BadInput(f"{exe}: exited with status {returncode} ({last[:200]})")
        size = out.seek(0, os.SEEK_END)
        if size > MAX_PROBE_OUTPUT:
            raise BadInput(
                f"{exe}: printed {size} bytes to librarian's probe, which answers in one short line; "
                "not a Python interpreter librarian can use"
            )
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return parse_probe(text, str(exe))


def _tail(f: BinaryIO, n: int) -> str:
    """The last ``n`` bytes of a temp file, as text."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - n))
    return f.read().decode("utf-8", "replace")
