"""build: compile one combo's wheel in a reused environment that holds exactly that combo's torch.

The steps a farm's build job used to spell out in shell, each where farms break: the environment is made
once per (CPython, torch, CUDA, platform) and reused; torch is installed the way plan's ``torch-install``
says and then checked (a build that picks up another torch links the wrong ABI); the build runs without
build isolation so that torch stays that one; nvcc's CUDA major must be the combo's; TORCH_CUDA_ARCH_LIST
is exactly the asked cells and MAX_JOBS fits the memory. The log goes to a file outside the build folder
(it outlives a failed build). Checking and filing the wheel is publish's (:mod:`librarian.ops.store.publish`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from librarian.build_record import BuildRecord, Toolchain
from librarian.coords import format_version
from librarian.errors import LibrarianError
from librarian.machine import TorchInfo
from librarian.ops.build import compile_cache
from librarian.ops.build.build_env import (
    BuildFailed,
    BuildSettings,
    Environment,
    bin_dir,
    build_environ,
    ensure_environment,
    ensure_torch,
    run_install,
)
from librarian.ops.build.build_facts import record_of, source_of, toolchain_of
from librarian.ops.build.build_names import environment_packages
from librarian.ops.build.build_request import BuildRequest, check_nvcc, max_jobs
from librarian.ops.build.build_run import BuildLog, Say, run_logged
from librarian.ops.build.build_sandbox import sandbox_prefix
from librarian.ops.build.build_source import build_tools, spec_arguments, stage_source
from librarian.probe.libc import detect_glibc
from librarian.probe.target import Target, probe_target
from librarian.probe.toolchain import Nvcc, detect_cores, detect_memory, find_nvcc
from librarian.probe.torch import detect_torch
from librarian.pytorch.matrix import Combo
from librarian.redact import mask
from librarian.safeio import user_cache_dir

__all__ = ["BuildFailed", "BuildSettings", "Built", "build", "build_cache", "target_torch"]

log = logging.getLogger(__name__)

NO_CACHE_RETRY = 86400.0  # seconds a build environment that could not install ccache is not asked again
STEP = re.compile(r"^\[\d+/\d+\]|^building '|^Building wheel|nvcc |^creating |^running build")


@dataclass(frozen=True, slots=True)
class Built:
    """What a build made and how: the wheel, its log, the torch and arch list it was built with, and what
    the build environment holds (a wheel of one of those is not the package asked)."""

    wheel: Path
    log: Path
    torch: TorchInfo
    arch_list: str
    environment_packages: frozenset[str] = field(default_factory=frozenset)
    seconds: float = 0.0  # the build step's (pip wheel's) wall time
    cache: compile_cache.CacheStats | None = None  # what the compile cache served, where one was used
    record: BuildRecord | None = None  # its source, toolchain, seconds and runner (the index entry's)


def build_cache(environ: Mapping[str, str] | None = None) -> Path:
    """``$LIBRARIAN_CACHE/build``, else ``$XDG_CACHE_HOME/librarian/build`` (``~/.cache``)."""
    return user_cache_dir(environ) / "build"


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
    source = source_of(request.spec, spec_args[-1])  # before the build writes into its copy
    toolchain: Toolchain | None = None
    try:
        env = ensure_environment(request, settings, cache, say)
        torch = ensure_torch(env, request, settings, log, say)
        tools = build_tools(spec_args[-1] if Path(spec_args[-1]).exists() else request.spec,
                            shutil.which("ninja") is not None)  # fmt: skip
        if tools:
            say(mask(f"installing the build tools: {' '.join(tools)}"))
        run_install(env, tools, log, "the build tools", say)
        run_env = _run_environ(request, env, nvcc, folder, jobs, sandbox=bool(sandbox))
        toolchain = toolchain_of(nvcc, torch, run_env)
        cached = (
            _cache_for(settings.compile_cache, env, nvcc, folder, run_env, log, say)
            if settings.compile_cache is not None and not sandbox
            else None
        )
        wheel, seconds, stats = _compile(
            request, env, folder, spec_args, sandbox, cached, run_env, log, say, step
        )
    except BuildFailed as e:  # what it had learnt, for its failure record
        e.source, e.toolchain = source, toolchain or toolchain_of(nvcc, None, os.environ)
        e.log = log.path
        raise
    record = record_of(source, toolchain, seconds, len(request.sms))
    return Built(wheel, log.path, torch, request.arch_list, environment_packages(env), seconds, stats, record)


def _run_environ(
    request: BuildRequest, env: Environment, nvcc: Nvcc, folder: Path, jobs: int | str, *, sandbox: bool
) -> dict[str, str]:
    """The environment pip wheel runs in: the arch list, MAX_JOBS, nvcc's toolkit, temporary files in the
    build folder (removed with it, however it ends)."""
    tmp = folder / "tmp"
    tmp.mkdir()
    return build_environ(
        {
            "TMPDIR": str(tmp),
            **({"PIP_CACHE_DIR": str(folder / "pip-cache")} if sandbox else {}),
            "TORCH_CUDA_ARCH_LIST": request.arch_list,
            "MAX_JOBS": str(jobs),
            "CUDA_HOME": nvcc.toolkit,
            "PATH": os.pathsep.join(
                [str(bin_dir(env.folder)), str(Path(nvcc.path).parent), os.environ.get("PATH", "")]
            ),
            "VIRTUAL_ENV": str(env.folder),
        }
    )


def _compile(
    request: BuildRequest, env: Environment, folder: Path, spec_args: list[str], sandbox: list[str],
    cached: compile_cache.CompileCache | None, run_env: dict[str, str], log: BuildLog, say: Say, step: Say,
) -> tuple[Path, float, compile_cache.CacheStats | None]:  # fmt: skip
    """pip wheel, through the compile cache where there is one: the one wheel, the seconds, the cache's counts."""
    dist = folder / "dist"
    dist.mkdir()
    cmd = [str(env.python), "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
           "--disable-pip-version-check", "-w", str(dist), *spec_args]  # fmt: skip
    say(mask(f"building {request.spec} for {request.describe()}"))
    started = time.monotonic()
    try:
        code, tail = run_logged(
            [*sandbox, *cmd],
            dict(cached.env) if cached is not None else run_env,  # nvcc through the cache's shadow toolkit
            log,
            lambda line: step(f"{time.monotonic() - started:.0f}s {line}") if STEP.search(line) else None,
            heartbeat=lambda elapsed: step(f"{elapsed:.0f}s still building (no compile step for a while)"),
        )
    finally:
        seconds = time.monotonic() - started
        stats = cached.stats() if cached is not None else None
        if stats is not None:
            say(stats.line())
    if code != 0:
        raise BuildFailed(f"{mask(request.spec)}: the build failed (exit {code}; log: {log.path})", tail)
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        made = ", ".join(w.name for w in wheels) or "none"
        raise BuildFailed(
            f"{mask(request.spec)}: the build made {len(wheels)} wheels, not one ({made}; log: {log.path})",
            tail,
        )
    say(f"built {wheels[0].name} in {seconds:.0f} s")
    return wheels[0], seconds, stats


def _cache_for(
    where: Path, env: Environment, nvcc: Nvcc, folder: Path, run_env: dict[str, str], log: BuildLog, say: Say
) -> compile_cache.CompileCache | None:
    """ccache for this build: on PATH, else installed into the build environment (a failure: uncached, and
    not tried again in that environment for a day, so that an offline machine does not wait on every build)."""
    installed = bin_dir(env.folder) / compile_cache.TOOL
    tool = compile_cache.find_tool(installed)
    tried = env.folder / ".librarian-no-ccache"
    fresh = tried.exists() and time.time() - tried.stat().st_mtime < NO_CACHE_RETRY
    if tool is None and not fresh:
        with contextlib.suppress(LibrarianError):  # said by start(): built uncached
            run_install(
                env, [compile_cache.PACKAGE], log, f"the compile cache ({compile_cache.PACKAGE})", say
            )
        tool = compile_cache.find_tool(installed)
        if tool is None:
            with contextlib.suppress(OSError):
                tried.write_bytes(b"")
    return compile_cache.start(tool, where, nvcc.toolkit, folder, run_env, say)


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
