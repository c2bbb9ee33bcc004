"""build: compile one combo's wheel in a reused environment that holds exactly that combo's torch.

The steps a farm's build job used to spell out in shell, each where farms break: the environment is made
once per (CPython, torch, CUDA, platform) and reused; torch is installed the way plan's ``torch-install``
says and then checked (a build that picks up another torch links the wrong ABI); the build runs without
build isolation so that torch stays that one; nvcc's CUDA major must be the combo's; TORCH_CUDA_ARCH_LIST
is exactly the asked cells and MAX_JOBS fits the memory. The log goes to a file outside the build folder
(it outlives a failed build). Checking and filing the wheel is publish's (:mod:`librarian.ops.publish`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from librarian.coords import format_version
from librarian.errors import BadInput, LibrarianError, Unreachable
from librarian.machine import TorchInfo
from librarian.ops import compile_cache
from librarian.ops.build_names import environment_packages
from librarian.ops.build_request import BuildRequest, check_nvcc, max_jobs
from librarian.ops.build_run import BuildLog, Say, run_logged
from librarian.ops.build_sandbox import sandbox_prefix
from librarian.ops.build_source import build_tools, spec_arguments, stage_source
from librarian.probe.libc import detect_glibc
from librarian.probe.target import Target, probe_target
from librarian.probe.toolchain import Nvcc, detect_cores, detect_memory, find_nvcc
from librarian.probe.torch import detect_torch, detect_torch_site
from librarian.pytorch.matrix import Combo
from librarian.redact import TOKEN_ENV, mask
from librarian.safeio import user_cache_dir

log = logging.getLogger(__name__)

MARKER = ".librarian-env.json"  # written last: an environment without it was cut off while being made
# pip's and uv's words when the index could not be reached at all (then exit 3, not a failed build).
_UNREACHABLE = re.compile(
    r"Failed to establish a new connection|Network is unreachable|Temporary failure in name resolution|"
    r"Name or service not known|Could not fetch URL|Failed to fetch|error sending request|Connection refused",
    re.IGNORECASE,
)
# A line of build output worth showing as progress: ninja's [3/10], setuptools' and nvcc's steps.
STEP = re.compile(r"^\[\d+/\d+\]|^building '|^Building wheel|nvcc |^creating |^running build")


class BuildFailed(LibrarianError):
    """The build (or an install in its environment) failed: exit 1, the log's last lines as details."""

    exit_code = 1

    def __init__(self, message: str, tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.tail = tuple(tail)

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
    compile_cache: bool = False  # nvcc and the host compiler behind sccache (a failure: built uncached)
    compile_cache_dir: Path | None = None  # default: the user's cache's sccache folder


@dataclass(frozen=True, slots=True)
class Built:
    """What a build made and how: the wheel, its log, the torch and arch list it was built with, and what
    the build environment holds (a wheel of one of those is not the package asked)."""

    wheel: Path
    log: Path
    torch: TorchInfo
    arch_list: str
    environment_packages: frozenset[str] = field(default_factory=frozenset)


def build_cache(environ: Mapping[str, str] | None = None) -> Path:
    """``$LIBRARIAN_CACHE/build``, else ``$XDG_CACHE_HOME/librarian/build`` (``~/.cache``)."""
    return user_cache_dir(environ) / "build"


# --- the environment -----------------------------------------------------------------------------


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


def _bin(folder: Path) -> Path:
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
    python = _bin(folder) / ("python.exe" if os.name == "nt" else "python")
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
            _run_install(env, args, log, "torch", say)
        where = "installed in the build environment"
    else:
        args = ["--target", str(settings.torch_from)]
        where = f"the target's own ({settings.torch_from}): no torch downloaded"
    torch = _environment_torch(env)
    if torch is None:
        raise BuildFailed(f"{env.folder}: no torch after '{mask(' '.join(args))}'; the build needs {want}")
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


def _run_install(env: Environment, args: Sequence[str], log: BuildLog, what: str, say: Say) -> None:
    if not args:  # an empty requirement list: nothing to install (pip would refuse an empty command)
        return
    cmd = env.install_command(args)
    code, tail = run_logged(cmd, build_environ(), log, lambda line: None, heartbeat=_still(say, what))
    if code != 0:
        text = "\n".join(tail)
        if _UNREACHABLE.search(text):
            raise Unreachable(f"installing {what}: the package index cannot be reached (log: {log.path})")
        raise BuildFailed(f"installing {what} failed (exit {code}; log: {log.path})", tail)


def _still(say: Say, what: str) -> Callable[[float], None]:
    return lambda elapsed: say(f"{elapsed:.0f}s still {what} (no output for a while)")


def build_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a build's commands run in: this one less the Hub's tokens (a build backend is code
    from the source; it has no business with the store's credentials), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in TOKEN_ENV and k != "HF_HUB_TOKEN"}
    return {**env, **(extra or {})}


def build(request: BuildRequest, settings: BuildSettings, folder: Path, say: Say, step: Say) -> Built:
    """Compile ``request`` into a wheel in ``folder``/dist; BuildFailed (exit 1) with the log's tail."""
    spec_arguments(request.spec)  # a spec that is no path nor requirement: before anything runs
    nvcc = find_nvcc()
    warning = check_nvcc(nvcc, request.combo.cuda)  # before anything is downloaded
    say(f"using {nvcc}")
    if warning:
        say(f"warning: {warning}")
    if (host := detect_glibc().value) is not None and host[:2] > request.glibc:  # said before compiling
        say(
            f"warning: this host's glibc {format_version(host[:2])} is above {format_version(request.glibc)}, "
            "the floor plan counts at: a wheel linked here may need newer symbols and be refused after "
            f"compiling (build in the combo's builder image, or pass --glibc {format_version(host[:2])} to "
            "count at this host's)"
        )
    cache = settings.cache or build_cache()
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = BuildLog(logs / f"{request.env_name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log")
    try:
        return _build(request, settings, folder, say, step, nvcc, cache, log)
    finally:
        log.close()


def _build(
    request: BuildRequest, settings: BuildSettings, folder: Path, say: Say, step: Say, nvcc: Nvcc,
    cache: Path, log: BuildLog,
) -> Built:  # fmt: skip
    jobs, why = max_jobs(detect_cores(), detect_memory(), os.environ.get("MAX_JOBS"))
    say(
        f"TORCH_CUDA_ARCH_LIST={request.arch_list} (the cells asked: {', '.join(f'sm{s.sm}' for s in request.sms)})"
    )
    say(f"MAX_JOBS={jobs} ({why})")
    say(f"log: {log.path}")
    sandbox = sandbox_prefix(folder) if settings.sandbox else []  # refused before anything is downloaded
    if sandbox:
        say(f"sandbox: {sandbox[0]}; the backend may write only in {folder}")
    spec_args = stage_source(request.spec, folder, say)
    env = ensure_environment(request, settings, cache, say)
    torch = ensure_torch(env, request, settings, log, say)
    tools = build_tools(spec_args[-1] if Path(spec_args[-1]).exists() else request.spec,
                        shutil.which("ninja") is not None)  # fmt: skip
    if tools:
        say(mask(f"installing the build tools: {' '.join(tools)}"))
    _run_install(env, tools, log, "the build tools", say)
    dist = folder / "dist"
    dist.mkdir()
    cmd = [str(env.python), "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
           "--disable-pip-version-check", "-w", str(dist), *spec_args]  # fmt: skip
    tmp = folder / "tmp"  # pip's and the compilers' temporary files: removed with the folder, however it ends
    tmp.mkdir()
    run_env = build_environ(
        {
            "TMPDIR": str(tmp),
            **({"PIP_CACHE_DIR": str(folder / "pip-cache")} if sandbox else {}),
            "TORCH_CUDA_ARCH_LIST": request.arch_list,
            "MAX_JOBS": str(jobs),
            "CUDA_HOME": nvcc.toolkit,
            "PATH": os.pathsep.join(
                [str(_bin(env.folder)), str(Path(nvcc.path).parent), os.environ.get("PATH", "")]
            ),
            "VIRTUAL_ENV": str(env.folder),
        }
    )
    cached = (
        _cache_for(settings, env, nvcc, folder, run_env, log, say)
        if settings.compile_cache and not sandbox
        else None
    )
    if cached is not None:  # nvcc through the cache's shadow toolkit (PATH, PYTORCH_NVCC)
        run_env = dict(cached.env)
    say(mask(f"building {request.spec} for {request.describe()}"))
    started = time.monotonic()
    try:
        code, tail = run_logged(
            [*sandbox, *cmd],
            run_env,
            log,
            lambda line: step(f"{time.monotonic() - started:.0f}s {line}") if STEP.search(line) else None,
            heartbeat=lambda elapsed: step(f"{elapsed:.0f}s still building (no compile step for a while)"),
        )
    finally:
        if cached is not None:
            say(cached.stop())
    if code != 0:
        raise BuildFailed(f"{mask(request.spec)}: the build failed (exit {code}; log: {log.path})", tail)
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        made = ", ".join(w.name for w in wheels) or "none"
        raise BuildFailed(
            f"{mask(request.spec)}: the build made {len(wheels)} wheels, not one ({made}; log: {log.path})",
            tail,
        )
    say(f"built {wheels[0].name} in {time.monotonic() - started:.0f} s")
    return Built(wheels[0], log.path, torch, request.arch_list, environment_packages(env))


def _cache_for(
    settings: BuildSettings, env: Environment, nvcc: Nvcc, folder: Path, run_env: dict[str, str], log: BuildLog,
    say: Say,
) -> compile_cache.CompileCache | None:  # fmt: skip
    """sccache for this build: on PATH, else installed into the build environment (a failure: uncached)."""
    installed = _bin(env.folder) / "sccache"
    tool = compile_cache.find_tool(installed)
    if tool is None:
        with contextlib.suppress(LibrarianError):  # said by start(): built uncached
            _run_install(env, ["sccache"], log, "the compile cache (sccache)", say)
        tool = compile_cache.find_tool(installed)
    where = settings.compile_cache_dir or user_cache_dir() / "sccache"
    return compile_cache.start(tool, where, nvcc.toolkit, folder / "cuda-cached", run_env, say)


def target_torch(python: Path, combo: Combo) -> Path | None:
    """``python`` when the torch installed there is the combo's (its line and CUDA): built against in place
    of a second download; else ``None``."""
    try:
        facts = probe_target(Target(python, "the target interpreter"))
    except LibrarianError:
        return None
    torch = detect_torch(list(facts.path))
    if torch is None or torch.cuda != combo.cuda:
        return None
    return python if torch.version.startswith(f"{format_version(combo.torch)}.") else None
