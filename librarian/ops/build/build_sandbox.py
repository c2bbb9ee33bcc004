"""What a build's backend may reach: its source copy holds no link out of it (:func:`outward_links`), and
under ``build --sandbox`` it runs in bubblewrap with the whole machine read-only but its build folder (the
source copy, its temporary files, the wheel it makes), its own ``/dev`` and ``/proc``, and the network (an
sdist's build tools come from an index).

Without ``--sandbox`` a backend is code from the source running as the user: it can read and write what
the user can. The README says so.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from pathlib import Path

from librarian.errors import BadInput

# What bubblewrap needs to be told for a read-only machine with one writable folder; ``--die-with-parent``:
# a killed librarian takes the sandbox with it.
_READ_ONLY = ("--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
MAX_LINKS = 100_000  # entries looked at in a source folder for links


def outward_links(source: Path, left_out: tuple[str, ...] = ()) -> list[str]:
    """The symbolic links under ``source`` (less what the patterns ``left_out`` name) whose target is outside it,
    each as ``link -> target``: a copy would keep the link, and the backend read or write through it."""
    root = os.path.realpath(source)
    found: list[str] = []
    seen = 0

    def kept(name: str) -> bool:  # as the copy's ignore patterns leave it out
        return not any(fnmatch.fnmatch(name, pattern) for pattern in left_out)

    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if kept(d)]
        for name in [n for n in (*dirs, *files) if kept(n)]:
            seen += 1
            path = os.path.join(folder, name)
            if seen > MAX_LINKS or not os.path.islink(path):
                continue
            target = os.readlink(path)
            # judged as the copy will hold it: an absolute target is outside the copy, however it reads
            inside = not os.path.isabs(target) and _within(
                root, os.path.join(os.path.realpath(folder), target)
            )
            if not inside:
                found.append(f"{os.path.relpath(path, source)} -> {target}")
    return found


def _within(root: str, path: str) -> bool:
    resolved = os.path.realpath(path)
    return os.path.commonpath([root, resolved]) == root


def sandbox_prefix(writable: Path) -> list[str]:
    """What runs a command in bubblewrap with ``writable`` its only writable folder (tried once, here);
    BadInput (one line) where this machine has no bubblewrap or it cannot make a sandbox here (user
    namespaces switched off)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise BadInput(
            "--sandbox: bubblewrap (bwrap) is not on PATH; install it (apt install bubblewrap, dnf install "
            "bubblewrap) or build without --sandbox"
        )
    prefix = [bwrap, *_READ_ONLY, "--bind", str(writable), str(writable)]
    tried = subprocess.run([*prefix, "--", "true"], capture_output=True, text=True, check=False, timeout=60)
    if tried.returncode != 0:
        why = (tried.stderr.strip().splitlines() or [f"exit {tried.returncode}"])[-1]
        raise BadInput(f"--sandbox: bubblewrap cannot make a sandbox on this machine ({why})")
    return [*prefix, "--chdir", str(writable), "--"]
