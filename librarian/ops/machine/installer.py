"""What pull hands to an installer: pip's (or uv's) command line, and a hash-pinned requirements file.

``--force-reinstall --no-deps`` on every install: a pulled wheel replaces what is there, and never drags
in another torch than the one pinned.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from librarian.coords import WheelName
from librarian.errors import BadInput, LibrarianError, Refused
from librarian.index import IndexEntry
from librarian.machine import Machine
from librarian.safeio import atomic_write

log = logging.getLogger(__name__)


def render_requirements(picks: Sequence[tuple[IndexEntry, str]]) -> str:
    """Pure: one ``name @ URL --hash=sha256:HEX`` line per wheel (pip's and uv's requirements format).

    A hash on every line puts pip in hash-checking mode: it installs exactly these bytes or refuses.
    """
    lines = [
        "# written by librarian pull: install with  pip install --force-reinstall --no-deps -r THIS_FILE"
    ]
    lines += [f"{e.name.distribution} @ {url} --hash=sha256:{e.sha256}" for e, url in picks]
    return "\n".join(lines) + "\n"


def write_requirements(path: Path, picks: Sequence[tuple[IndexEntry, str]]) -> None:
    """Write the requirements file through a temp file and a rename (never half-written); an error names
    ``path``, never the temp file beside it."""
    if path.is_dir():
        raise BadInput(f"{path}: is a directory; --requirements names the file to write")
    try:
        atomic_write(path, render_requirements(picks).encode("utf-8"))
    except OSError as e:
        raise BadInput(
            f"{path}: cannot write the requirements file ({e.strerror or type(e).__name__})"
        ) from e


def install(files: Sequence[Path], interpreter: str) -> None:
    """``pip install --force-reinstall --no-deps`` the pulled wheels into ``interpreter``'s environment.

    ``--no-deps`` keeps the pinned torch. An interpreter without pip (uv made the venv) gets
    ``uv pip install --python INTERPRETER --reinstall --no-deps``.
    """
    cmd = installer_command(interpreter) + [*map(str, files)]
    log.info("running %s", " ".join(cmd))
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise LibrarianError(f"{' '.join(cmd[:3])}: exited with status {result.returncode}")


def installer_command(interpreter: str) -> list[str]:
    has_pip = (
        subprocess.run([interpreter, "-m", "pip", "--version"], capture_output=True, check=False).returncode
        == 0
    )
    if has_pip:
        return [interpreter, "-m", "pip", "install", "--force-reinstall", "--no-deps"]
    uv = shutil.which("uv") or _uv_beside_us()
    if uv is None:
        raise BadInput(
            f"{interpreter}: has no pip, and uv is not installed; install either (python -m ensurepip)"
        )
    return [uv, "pip", "install", "--python", interpreter, "--reinstall", "--no-deps"]


def _uv_beside_us() -> str | None:
    # `pip install uv` beside librarian (as its test extra does) puts uv next to our interpreter.
    found = Path(sys.executable).parent / "uv"
    return str(found) if found.exists() else None


def install_checked(files: Sequence[Path], machine: Machine, *, force: bool) -> None:
    """Install pulled wheels into ``machine``'s target interpreter, none whose judgement there fails unless
    ``force`` (:func:`check_installable` first: a refusal installs nothing), torch left as it was
    (:func:`install_keeping_torch`)."""
    check_installable(files, machine, force=force)
    install_keeping_torch(files, machine)


def check_installable(files: Sequence[Path], machine: Machine, *, force: bool) -> None:
    """Refuse a wheel that would write another distribution's files, or (unless ``force``) whose judgement
    on ``machine`` fails; nothing is installed."""
    # Imported here: only an install reads the wheels' bytes, and a plain pull must not load the binary
    # readers (tests/test_startup.py). Not a cycle: a start-up cost.
    from librarian.ops.machine.doctor import check_runs

    check_own_files(files, machine)
    check_runs(files, machine, force=force)


def install_keeping_torch(files: Sequence[Path], machine: Machine) -> None:
    """:func:`install` ``files``, then hold torch's own files to its RECORD: where the install changed one
    (the checks before it should make that impossible), the one line says which and how to put it back."""
    from librarian.probe.installed import site_dirs, torch_altered

    sites = site_dirs(machine.search_path.value or ())
    before = set(torch_altered(sites)[1])
    install(files, machine.interpreter.value or sys.executable)  # looked up now: tests stand in for pip
    version, after = torch_altered(sites)
    if changed := [a for a in after if a not in before]:
        raise LibrarianError(
            f"after the install, torch's own files are not those it installed: {'; '.join(changed[:3])}"
            f"{f' (and {len(changed) - 3} more)' if len(changed) > 3 else ''}; "
            f"pip install --force-reinstall --no-deps torch=={version} puts them back"
        )


def check_own_files(files: Sequence[Path], machine: Machine) -> None:
    """Refuse (no flag accepts it) a wheel with a member that would write another distribution's files in
    the target environment: torch's, the interpreter, or a name another installed distribution owns; one
    line naming the member and what it would overwrite, before anything is installed."""
    from librarian.probe.installed import site_dirs
    from librarian.probe.installed_names import names_of_others
    from librarian.wheel import TORCH_ENVIRONMENT, OpenedWheel, ownership_problem

    sites = site_dirs(machine.search_path.value or ())
    for path in files:
        name = WheelName.parse(path.name)
        members = [m.path for m in OpenedWheel.wheel(path, name).info().members]
        taken = TORCH_ENVIRONMENT | names_of_others(sites, name.package)
        if (problem := ownership_problem(name, members, taken)) is not None:
            raise Refused(f"{path.name}: {problem}")
