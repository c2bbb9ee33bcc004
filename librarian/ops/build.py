"""build: compile one combo's wheel in a reused environment that holds exactly that combo's torch.

The steps a farm's build job used to spell out in shell, each where farms break: the environment is made
once per (CPython, torch, CUDA, platform) and reused; torch is installed the way plan's ``torch-install``
says and then checked (a build that picks up another torch links the wrong ABI); the build runs without
build isolation so that torch stays that one; nvcc's CUDA major must be the combo's; TORCH_CUDA_ARCH_LIST
is exactly the asked cells and MAX_JOBS fits the memory. The log goes to a file outside the build folder
(it outlives a failed build). Checking and filing the wheel is publish's (:mod:`librarian.ops.publish`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from librarian.compat import tomllib
from librarian.coords import format_version
from librarian.errors import BadInput, LibrarianError, Unreachable
from librarian.machine import TorchInfo
from librarian.ops.build_request import (
    BuildRequest,
    Nvcc,
    check_nvcc,
    max_jobs,
    parse_nvcc_home,
    parse_nvcc_release,
)
from librarian.ops.build_run import Say, run_logged
from librarian.probe.target import Target, probe_target
from librarian.probe.torch import detect_torch

log = logging.getLogger(__name__)

# What PEP 517 builds with when a package declares no [build-system] (setuptools' legacy setup.py).
PEP517_DEFAULT = ("setuptools>=40.8.0", "wheel")
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
    folder of wheels; None: PyTorch's, as plan says), the cache of environments and logs, ``--keep``."""

    installer: str = "auto"
    torch_index: str | None = None
    cache: Path | None = None
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Built:
    """What a build made and how: the wheel, its log, the folder (kept or removed), the settings it ran with."""

    wheel: Path
    log: Path
    folder: Path
    environment: Path
    nvcc: Nvcc
    torch: TorchInfo
    arch_list: str
    max_jobs: str


def build_cache(environ: Mapping[str, str] | None = None) -> Path:
    """``$LIBRARIAN_CACHE/build``, else ``$XDG_CACHE_HOME/librarian/build`` (``~/.cache``)."""
    env = os.environ if environ is None else environ
    base = env.get("LIBRARIAN_CACHE") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "librarian"
    )
    return Path(base) / "build"


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
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BadInput(f"{path}: cannot run it ({e})") from e
    release = parse_nvcc_release(done.stdout)
    if release is None:
        raise BadInput(f"{path}: 'nvcc --version' names no CUDA release")
    return Nvcc(path, source, release, _nvcc_home(path) or "")


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


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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
    """The combo's build environment, made on first use and reused after (its marker written last)."""
    folder = cache / "envs" / request.env_name
    uv = _uv(settings)
    python = _bin(folder) / ("python.exe" if os.name == "nt" else "python")
    if not (folder / MARKER).exists():
        shutil.rmtree(folder, ignore_errors=True)  # an environment cut off while being made
        folder.parent.mkdir(parents=True, exist_ok=True)
        version = request.combo.python.version
        say(f"making the build environment {folder} (CPython {version}, {'uv' if uv else 'venv + pip'})")
        if uv:
            cmd = [uv, "venv", "--quiet", "--seed", "--python", version, str(folder)]
        else:
            cmd = [_interpreter(version), "-m", "venv", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise BadInput(
                f"{folder}: cannot make the build environment ({(lines or ['no output'])[-1][:300]})"
            )
    else:
        say(f"reusing the build environment {folder}")
    return Environment(folder, python, uv)


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
    env: Environment, request: BuildRequest, settings: BuildSettings, log_path: Path, say: Say
) -> TorchInfo:
    """The combo's torch in the environment (installed once), checked by reading what is installed."""
    args = torch_install_args(request, settings.torch_index)
    marker = _read_marker(env.folder)
    if marker.get("torch-install") != args or _environment_torch(env) is None:
        say(f"installing {' '.join(args)}")
        _run_install(env, args, log_path, "torch")
    torch = _environment_torch(env)
    c = request.combo
    want = f"torch {format_version(c.torch)} (cu{c.cuda[0]}{c.cuda[1]})"
    if torch is None:
        raise BuildFailed(f"{env.folder}: no torch after '{' '.join(args)}'; the build needs {want}")
    if not torch.version.startswith(f"{format_version(c.torch)}.") or torch.cuda != c.cuda:
        got = f"{torch.version} (CUDA {format_version(torch.cuda) if torch.cuda else 'none'})"
        raise BuildFailed(
            f"{env.folder}: the build environment's torch is {got}, not {want}; a build against it would "
            f"link another ABI than its label says (check --torch-index)"
        )
    (env.folder / MARKER).write_text(json.dumps({"torch-install": args, "torch": torch.version}))
    return torch


def _environment_torch(env: Environment) -> TorchInfo | None:
    facts = probe_target(Target(env.python, "the build environment"))
    return detect_torch(list(facts.path))


def build_requirements(spec: str) -> list[str]:
    """The spec's ``[build-system] requires`` (a folder or an sdist), torch left out: it is the combo's.

    A requirement (``flash-attn==2.8.3``) is not downloaded to read them: it gets PEP 517's default.
    """
    text: str | None = None
    path = Path(spec)
    try:
        if path.is_dir() and (path / "pyproject.toml").is_file():
            text = (path / "pyproject.toml").read_text()
        elif path.is_file() and tarfile.is_tarfile(path):
            with tarfile.open(path) as tar:
                member = next(
                    (
                        m
                        for m in tar.getmembers()
                        if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")
                    ),
                    None,
                )
                f = tar.extractfile(member) if member is not None and member.size < 1 << 20 else None
                text = f.read().decode("utf-8", "replace") if f is not None else None
    except (OSError, tarfile.TarError) as e:
        raise BadInput(f"{spec}: cannot read it ({e})") from e
    if text is None:
        return list(PEP517_DEFAULT)
    try:
        system = tomllib.loads(text).get("build-system")
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{spec}: pyproject.toml is not valid TOML ({e})") from e
    if not isinstance(system, dict):  # no [build-system]: setuptools, as pip would build it
        return list(PEP517_DEFAULT)
    requires = system.get("requires", [])
    return [str(r) for r in requires if not re.match(r"\s*torch\b(?![-_.\w])", str(r))]


def build_tools(spec: str, ninja_on_path: bool) -> list[str]:
    """What the environment needs beside torch: the spec's build requirements, and ninja where none is on
    PATH (torch's cpp_extension compiles one file at a time without it, whatever MAX_JOBS says)."""
    return [*build_requirements(spec), *(() if ninja_on_path else ("ninja",))]


def _run_install(env: Environment, args: Sequence[str], log_path: Path, what: str) -> None:
    cmd = env.install_command(args)
    code, tail = run_logged(cmd, dict(os.environ), log_path, lambda line: None)
    if code != 0:
        text = "\n".join(tail)
        if _UNREACHABLE.search(text):
            raise Unreachable(f"installing {what}: the package index cannot be reached (log: {log_path})")
        raise BuildFailed(f"installing {what} failed (exit {code}; log: {log_path})", tail)


def build(request: BuildRequest, settings: BuildSettings, folder: Path, say: Say, step: Say) -> Built:
    """Compile ``request`` into a wheel in ``folder``/dist; BuildFailed (exit 1) with the log's tail."""
    spec_args = spec_arguments(request.spec)  # a spec that is no path nor requirement: before anything runs
    nvcc = find_nvcc()
    warning = check_nvcc(nvcc, request.combo.cuda)  # before anything is downloaded
    say(f"using {nvcc}")
    if warning:
        say(f"warning: {warning}")
    cache = settings.cache or build_cache()
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{request.env_name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    jobs, why = max_jobs(_cores(), detect_memory(), os.environ.get("MAX_JOBS"))
    say(
        f"TORCH_CUDA_ARCH_LIST={request.arch_list} (the cells asked: {', '.join(f'sm{s.sm}' for s in request.sms)})"
    )
    say(f"MAX_JOBS={jobs} ({why})")
    say(f"log: {log_path}")
    env = ensure_environment(request, settings, cache, say)
    torch = ensure_torch(env, request, settings, log_path, say)
    tools = build_tools(request.spec, shutil.which("ninja") is not None)
    say(f"installing the build tools: {' '.join(tools)}")
    _run_install(env, tools, log_path, "the build tools")
    dist = folder / "dist"
    dist.mkdir()
    cmd = [
        str(env.python),
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--disable-pip-version-check",
    ]
    cmd += ["-w", str(dist), *spec_args]
    run_env = {
        **os.environ,
        "TORCH_CUDA_ARCH_LIST": request.arch_list,
        "MAX_JOBS": str(jobs),
        "CUDA_HOME": nvcc.toolkit,
        "PATH": os.pathsep.join(
            [str(_bin(env.folder)), str(Path(nvcc.path).parent), os.environ.get("PATH", "")]
        ),
        "VIRTUAL_ENV": str(env.folder),
    }
    say(f"building {request.spec} for {request.describe()}")
    started = time.monotonic()
    code, tail = run_logged(
        cmd,
        run_env,
        log_path,
        lambda line: step(f"{time.monotonic() - started:.0f}s {line}") if STEP.search(line) else None,
    )
    if code != 0:
        raise BuildFailed(f"{request.spec}: the build failed (exit {code}; log: {log_path})", tail)
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildFailed(
            f"{request.spec}: the build made {len(wheels)} wheels, not one (log: {log_path})", tail
        )
    say(f"built {wheels[0].name} in {time.monotonic() - started:.0f} s")
    return Built(wheels[0], log_path, folder, env.folder, nvcc, torch, request.arch_list, str(jobs))


def spec_arguments(spec: str) -> list[str]:
    """What pip wheel takes: a path made absolute (pip runs elsewhere); a requirement built from its sdist
    (``--no-binary NAME``: never a wheel someone else built), a URL as it is."""
    path = Path(spec)
    if path.exists():
        return [str(path.resolve())]
    url = urlsplit(spec)
    # A URL pip fetches itself (https://host/..., git+https://..., file:///...); a one-letter scheme is a
    # Windows drive (C:/src).
    if len(url.scheme) > 1 and (url.netloc or url.path.startswith("/")):
        return [spec]
    try:
        name = Requirement(spec).name
    except InvalidRequirement as e:
        raise BadInput(f"{spec}: no such file or folder, and not a requirement (NAME==VERSION)") from e
    return ["--no-binary", name, spec]
