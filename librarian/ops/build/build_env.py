"""A build's environment: made once per combo and reused (its marker written last), torch installed the way
plan's ``torch-install`` says and then checked by reading it, and the installs in it (the log's tail on a
failure). What :mod:`librarian.ops.build.build` compiles in.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from librarian.build_record import Source, Toolchain
from librarian.coords import format_version
from librarian.errors import BadInput, LibrarianError, Unreachable
from librarian.machine import TorchInfo
from librarian.ops.build.build_request import BuildRequest
from librarian.ops.build.build_run import BuildLog, Say, run_logged
from librarian.probe.target import Target, probe_target
from librarian.probe.torch import detect_torch, detect_torch_site
from librarian.redact import TOKEN_ENV, mask
from librarian.safeio import user_cache_dir

ENV_BUILD_CACHE = "LIBRARIAN_BUILD_CACHE"  # the compile cache's folder, or ``off``

MARKER = ".librarian-env.json"  # written last: an environment without it was cut off while being made
# pip's and uv's words when the index could not be reached at all (then exit 3, not a failed build).
_UNREACHABLE = re.compile(
    r"Failed to establish a new connection|Network is unreachable|Temporary failure in name resolution|"
    r"Name or service not known|Could not fetch URL|Failed to fetch|error sending request|Connection refused",
    re.IGNORECASE,
)
# A line of build output worth showing as progress: ninja's [3/10], setuptools' and nvcc's steps.


class BuildFailed(LibrarianError):
    """The build (or an install in its environment) failed: exit 1, the log's last lines as details."""

    exit_code = 1

    def __init__(self, message: str, tail: Sequence[str] = (), step: str = "compile") -> None:
        super().__init__(message)
        self.tail = tuple(tail)
        self.step = step  # what failed, as a failure record says it
        # what the build had learnt when it failed (its failure record's): set by build() on the way out
        self.source: Source | None = None
        self.toolchain: Toolchain | None = None
        self.log: Path | None = None

    def details(self) -> list[str]:
        """The log's last lines, indented under the error line."""
        return [f"  | {line}" for line in self.tail]


@dataclass(frozen=True, slots=True)
class BuildSettings:
    """How to build: the installer (``uv``, ``pip``; ``auto``: uv where found), torch's index (a URL or a
    folder of wheels; None: PyTorch's, as plan says), the cache of environments and logs, ``--keep``;
    ``torch_from``: an interpreter whose installed torch is the combo's, built against in place of a
    download (``pull --build`` into the environment the wheel is for)."""

    installer: str = "auto"
    torch_index: str | None = None
    cache: Path | None = None
    keep: bool = False
    torch_from: Path | None = None
    sandbox: bool = False  # the backend in bubblewrap: only its build folder writable
    # nvcc and the host compiler behind ccache, its cache in this folder (None: uncached; anything wrong with
    # the cache: built uncached, said in one line); see :func:`compile_cache_folder`
    compile_cache: Path | None = None


def compile_cache_folder(
    flag: Path | None, off: bool, configured: str | bool | None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Where a build's compile cache is, or ``None`` (uncached): ``--no-cache``, else ``--cache DIR``, else
    ``LIBRARIAN_BUILD_CACHE`` (a folder, or ``off``), else ``[tool.librarian] build-cache`` (a folder, or
    ``false``), else the user's cache's ``ccache`` folder: on by default."""
    env = os.environ if environ is None else environ
    if off:
        return None
    if flag is not None:
        return flag
    if (value := env.get(ENV_BUILD_CACHE)) is not None and value.strip():
        return None if value.strip().lower() in ("off", "0", "false", "no") else Path(value)
    if configured is False:
        return None
    if isinstance(configured, str):
        return Path(configured)
    return user_cache_dir(env) / "ccache"


@dataclass(frozen=True, slots=True)
class Environment:
    folder: Path
    python: Path
    uv: str | None  # installs go through ``uv pip`` when set, else the environment's pip

    def install_command(self, args: Sequence[str]) -> list[str]:
        if self.uv:
            return [self.uv, "pip", "install", "--python", str(self.python), *args]
        return [str(self.python), "-m", "pip", "install", "--disable-pip-version-check", *args]


def _uv(settings: BuildSettings) -> str | None:
    if settings.installer == "pip":
        return None
    found = shutil.which("uv") or (
        str(Path(sys.executable).parent / "uv") if (Path(sys.executable).parent / "uv").exists() else None
    )
    if found is None and settings.installer == "uv":
        raise BadInput("--installer uv: uv is not installed (pip install uv), or pass --installer pip")
    return found


def _interpreter(version: str) -> str:
    """A CPython of ``version`` for ``python -m venv``: ours when it is that one, else ``pythonX.Y`` on PATH."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    found = shutil.which(f"python{version}")
    if found is None:
        raise BadInput(
            f"no CPython {version} found (python{version} on PATH) to build for; install it, or install uv, "
            "which fetches one"
        )
    return found


def bin_dir(folder: Path) -> Path:
    return folder / ("Scripts" if os.name == "nt" else "bin")


def ensure_environment(request: BuildRequest, settings: BuildSettings, cache: Path, say: Say) -> Environment:
    """The combo's build environment, made on first use and reused after (its marker written last).

    With ``settings.torch_from``, one made by that interpreter whose site-packages (where its torch is) it
    sees after its own: the build tools are its own, torch is the target's, and nothing is downloaded."""
    name = request.env_name
    if settings.torch_from is not None:
        name += "-on-" + hashlib.sha256(str(settings.torch_from).encode()).hexdigest()[:12]
    folder = cache / "envs" / name
    uv = _uv(settings)
    python = bin_dir(folder) / ("python.exe" if os.name == "nt" else "python")
    if not (folder / MARKER).exists():
        shutil.rmtree(folder, ignore_errors=True)  # an environment cut off while being made
        folder.parent.mkdir(parents=True, exist_ok=True)
        version = request.combo.python.version
        base = str(settings.torch_from) if settings.torch_from is not None else None
        say(f"making the build environment {folder} (CPython {version}, {'uv' if uv else 'venv + pip'})")
        if uv:
            cmd = [uv, "venv", "--quiet", "--seed", "--python", base or version, str(folder)]
        else:
            cmd = [base or _interpreter(version), "-m", "venv", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise BadInput(
                f"{folder}: cannot make the build environment ({(lines or ['no output'])[-1][:300]})"
            )
        if settings.torch_from is not None:
            _see_target_torch(folder, Path(python), settings.torch_from)
    else:
        say(f"reusing the build environment {folder}")
    return Environment(folder, python, uv)


def _see_target_torch(folder: Path, python: Path, target: Path) -> None:
    """A ``.pth`` in the environment naming the folder the target's torch is installed in (after its own)."""
    facts = probe_target(Target(target, "the target interpreter"))
    site = detect_torch_site(list(facts.path))
    if site is None:
        shutil.rmtree(folder, ignore_errors=True)
        raise BadInput(f"{target}: has no torch to build against")
    own = probe_target(Target(python, "the build environment"))
    mine = next((p for p in own.path if p.endswith(("site-packages", "dist-packages")) and
                 Path(p).resolve().is_relative_to(folder.resolve())), None)  # fmt: skip
    if mine is None:
        shutil.rmtree(folder, ignore_errors=True)
        raise BadInput(f"{folder}: the build environment has no site-packages of its own")
    (Path(mine) / "librarian-target-torch.pth").write_text(f"{site}\n")


def torch_install_args(request: BuildRequest, torch_index: str | None) -> list[str]:
    """plan's ``torch-install`` as arguments; ``torch_index`` (a URL, or a folder of wheels) replaces its index."""
    args = shlex.split(request.combo.torch_install)
    if torch_index is None:
        return args
    requirement = args[0]
    if os.path.isdir(torch_index):
        return [requirement, "--no-index", "--find-links", os.path.abspath(torch_index)]
    return [requirement, "--index-url", torch_index]


def _read_marker(folder: Path) -> dict[str, object]:
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def ensure_torch(
    env: Environment, request: BuildRequest, settings: BuildSettings, log: BuildLog, say: Say
) -> TorchInfo:
    """The combo's torch in the environment (installed once, or the target's), checked by reading it."""
    c = request.combo
    want = f"torch {format_version(c.torch)} (cu{c.cuda[0]}{c.cuda[1]})"
    if settings.torch_from is None:
        args = torch_install_args(request, settings.torch_index)
        marker = _read_marker(env.folder)
        if marker.get("torch-install") != args or _environment_torch(env) is None:
            say(mask(f"installing {' '.join(args)}"))
            run_install(env, args, log, "torch", say)
        where = "installed in the build environment"
    else:
        args = ["--target", str(settings.torch_from)]
        where = f"the target's own ({settings.torch_from}): no torch downloaded"
    torch = _environment_torch(env)
    if torch is None:
        raise BuildFailed(
            f"{env.folder}: no torch after '{mask(' '.join(args))}'; the build needs {want}", step="torch"
        )
    if not torch.version.startswith(f"{format_version(c.torch)}.") or torch.cuda != c.cuda:
        got = f"{torch.version} (CUDA {format_version(torch.cuda) if torch.cuda else 'none'})"
        raise BuildFailed(
            f"{env.folder}: the build environment's torch is {got}, not {want}; a build against it would "
            f"link another ABI than its label says (check --torch-index)"
        )
    say(f"torch {torch.version} (CUDA {format_version(torch.cuda) if torch.cuda else 'none'}), {where}")
    (env.folder / MARKER).write_text(json.dumps({"torch-install": args, "torch": torch.version}))
    return torch


def _environment_torch(env: Environment) -> TorchInfo | None:
    facts = probe_target(Target(env.python, "the build environment"))
    return detect_torch(list(facts.path))


def run_install(env: Environment, args: Sequence[str], log: BuildLog, what: str, say: Say) -> None:
    if not args:  # an empty requirement list: nothing to install (pip would refuse an empty command)
        return
    cmd = env.install_command(args)
    code, tail = run_logged(cmd, build_environ(), log, lambda line: None, heartbeat=_still(say, what))
    if code != 0:
        text = "\n".join(tail)
        if _UNREACHABLE.search(text):
            raise Unreachable(f"installing {what}: the package index cannot be reached (log: {log.path})")
        raise BuildFailed(
            f"installing {what} failed (exit {code}; log: {log.path})", tail, f"installing {what}"
        )


def _still(say: Say, what: str) -> Callable[[float], None]:
    return lambda elapsed: say(f"{elapsed:.0f}s still {what} (no output for a while)")


def build_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a build's commands run in: this one less the Hub's tokens (a build backend is code
    from the source; it has no business with the store's credentials), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in TOKEN_ENV and k != "HF_HUB_TOKEN"}
    return {**env, **(extra or {})}
