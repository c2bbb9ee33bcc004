"""What one build is, before anything runs: the combo, the cells it must fill, nvcc and MAX_JOBS (pure).

``librarian build`` takes a combo by flags or one entry of ``plan --json``/``--github`` as it is; either
way it becomes a :class:`BuildRequest`, checked against the matrix and the GPU table before a byte is
downloaded. :mod:`librarian.ops.build.build` runs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from librarian.coords import (
    GpuArch,
    MajorMinor,
    format_cuda,
    format_version,
    package_key,
    parse_cuda,
    parse_torch,
)
from librarian.errors import BadInput
from librarian.gpus import find_gpu, parse_real_sm
from librarian.machine import parse_major_minor
from librarian.probe.toolchain import Nvcc
from librarian.pytorch.matrix import Combo, CPython, Matrix, Platform
from librarian.pytorch.matrix_render import combo_job

# Memory one compile job of a large extension takes at its peak: flash-attn's and natten's nvcc jobs reach
# 3-4 GiB each (flash-attn's README asks for MAX_JOBS=4 under 96 GB), so ninja's default of one job per core
# runs them out of memory on a many-core machine.
MEMORY_PER_JOB = 4 << 30
# Torch's own Linux wheels need glibc 2.28 (PyTorch builds them in manylinux_2_28 images, as plan's jobs
# do): a wheel that needs more does not run everywhere torch does, so by default it holds no cell of a plan.
DEFAULT_GLIBC: MajorMinor = (2, 28)


def arch_list(sms: Sequence[GpuArch], ptx: bool = False) -> str:
    """``8.0;8.9`` (``+PTX`` on the newest when asked): TORCH_CUDA_ARCH_LIST for exactly these GPUs."""
    archs = [format_version(sm.capability) for sm in sorted(set(sms), key=lambda a: a.capability)]
    if ptx and archs:
        archs[-1] += "+PTX"
    return ";".join(archs)


@dataclass(frozen=True, slots=True)
class BuildRequest:
    """One build: ``spec`` (a requirement, an sdist or a source folder) for one combo, filling ``sms``."""

    spec: str
    combo: Combo
    sms: tuple[GpuArch, ...]
    ptx: bool = False
    glibc: MajorMinor = (
        DEFAULT_GLIBC  # the floor the plan it serves counts at: a wheel above it holds no cell
    )
    package: str | None = None  # the package it must make (pip's normalized name), where the spec says
    version: Version | None = None  # the version it must make, where the spec pins one

    @property
    def arch_list(self) -> str:
        return arch_list(self.sms, self.ptx)

    def expecting(self, package: str | None = None) -> BuildRequest:
        """This request, holding the built wheel to ``package`` (``pull --build``'s package) and to what
        its spec names: ``NAME==VERSION`` pins both, a bare name the package."""
        name, version = self.package, self.version
        try:
            req = Requirement(self.spec)
        except InvalidRequirement:
            req = None
        if req is not None and not req.url:
            name = name or canonicalize_name(req.name)
            pins = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
            if version is None and len(pins) == 1:
                try:
                    version = Version(pins[0])
                except InvalidVersion:
                    version = None
        if package is not None:
            name = canonicalize_name(package)
        return replace(self, package=name, version=version)

    @property
    def env_name(self) -> str:
        """The build environment's folder name: one per (CPython, torch, CUDA, platform), reused."""
        c = self.combo
        return f"{c.python}-torch{format_version(c.torch)}-cu{format_cuda(c.cuda)}-{c.platform.value}"

    def to_json(self, matrix: Matrix) -> dict[str, Any]:
        """plan's job, an Actions matrix entry: the combo's job (runner, container, torch install line) for
        this build, its package, version, spec, arch list, cells and glibc floor. ``build --job`` reads it back."""
        job = combo_job(matrix, self.combo)
        job.pop("arch-source")
        job.update(
            {
                "package": package_key(self.package) if self.package else None,
                "version": str(self.version) if self.version is not None else None,
                "spec": self.spec,
                "TORCH_CUDA_ARCH_LIST": self.arch_list,
                "cells": [f"sm{sm.sm}" for sm in self.sms],
                "glibc": format_version(self.glibc),
            }
        )
        return job

    @property
    def recipe(self) -> str:
        """What plan gives this build to build with: the combo's builder image and torch install line (a
        failure record keeps it; plan plans the cells again when it changes)."""
        c = self.combo
        return " ".join(p for p in (c.platform.container(c.cuda), c.torch_install) if p)

    def describe(self) -> str:
        c = self.combo
        return (
            f"torch {format_version(c.torch)} with CUDA {format_version(c.cuda)}, {c.python}, "
            f"{c.platform.value}, for {', '.join(f'sm{s.sm}' for s in self.sms)}"
        )


def find_combo(
    matrix: Matrix, torch: MajorMinor, cuda: MajorMinor, python: CPython, platform: Platform
) -> Combo:
    """The shipped combo; BadInput naming what PyTorch does ship for that torch when it never shipped this."""
    for combo in matrix.combos(torch, cuda, python):
        if combo.platform is platform:
            return combo
    lines = ", ".join(format_version(c) for c in matrix.cuda_lines_for(torch)) or "none"
    raise BadInput(
        f"torch {format_version(torch)} with CUDA {format_version(cuda)} for {python} on {platform.value}: "
        f"PyTorch never shipped that build (its CUDA lines for torch {format_version(torch)}: {lines}; "
        "'librarian matrix' lists every combo)"
    )


def check_cells(combo: Combo, sms: Iterable[GpuArch]) -> tuple[GpuArch, ...]:
    """The cells, each a GPU the combo's CUDA line can compile for and that exists beside its CPU."""
    out = tuple(sorted(set(sms), key=lambda a: a.capability))
    if not out:
        raise BadInput("build: name the GPUs to build for (--sm 89, repeatable), or pass --job")
    for sm in out:
        real = find_gpu(sm.capability)
        if real is None:  # parse_real_sm already refused it; a job's cells come through here too
            raise BadInput(f"sm{sm.sm}: no GPU of that compute capability exists")
        if not real.compiled_by(combo.cuda):
            raise BadInput(
                f"--sm {sm.sm}: CUDA {format_version(combo.cuda)} cannot compile for sm_{sm.sm} "
                f"({real.toolkits()} can); no build of this combo can fill that cell"
            )
        if not real.ships_with(frozenset({combo.platform.cpu})):
            raise BadInput(f"--sm {sm.sm}: that GPU never ships beside a {combo.platform.cpu} CPU")
    return out


def check_host(request: BuildRequest, host: tuple[str, str]) -> None:
    """BadInput, naming the runner and container plan's job gives it, when this host (OS, CPU) cannot build
    for the request's platform: a build makes wheels for the platform it runs on, and another platform's
    environment would hold this one's torch under another's name."""
    plat = request.combo.platform
    os_name = "win32" if plat is Platform.WINDOWS_AMD64 else "linux"
    if host == (os_name, plat.cpu):
        return
    here = f"{'windows' if host[0] == 'win32' else host[0]}-{host[1]}"
    image = plat.container(request.combo.cuda)
    where = f"runs-on {plat.runs_on}" + (f", container {image}" if image else "")
    raise BadInput(
        f"--platform {plat.value}: this host is {here}; a build makes wheels for its own platform: build "
        f"{plat.value} on one ({where}, as 'plan --github' says)"
    )


def request_from_flags(
    matrix: Matrix,
    spec: str,
    torch: str,
    cuda: str,
    python: str,
    platform: str,
    sms: Sequence[str],
    ptx: bool = False,
    glibc: str | None = None,
) -> BuildRequest:
    """``--torch 2.9 --cuda 12.8 --python 3.12 --platform linux-x86_64 --sm 80 --sm 89``, checked; ``glibc``:
    the floor of the plan it serves (``--glibc``, default torch's 2.28)."""
    try:
        plat = Platform.parse(platform)
    except ValueError as e:
        raise BadInput(str(e)) from e
    combo = find_combo(matrix, parse_torch(torch), parse_cuda(cuda), CPython.parse(python), plat)
    floor = parse_major_minor(glibc, "glibc") if glibc else DEFAULT_GLIBC
    return BuildRequest(spec, combo, check_cells(combo, (parse_real_sm(s) for s in sms)), ptx, floor)


def request_from_job(matrix: Matrix, text: str, spec: str | None = None) -> BuildRequest:
    """One entry of ``plan --json``'s ``jobs`` or ``plan --github``'s ``include``, as it is; ``spec`` (the
    SPEC argument: a checkout, an sdist) takes the place of the job's own ``spec``."""
    try:
        job: Any = json.loads(text)
    except ValueError as e:
        raise BadInput(f"--job: not JSON ({e})") from e
    if not isinstance(job, Mapping):
        raise BadInput("--job: a JSON object, one entry of 'plan --json' jobs or 'plan --github' include")
    missing = [k for k in ("torch", "cuda", "platform", "cells") if k not in job]
    if "python-tag" not in job and "python" not in job:
        missing.append("python-tag")
    if missing:
        raise BadInput(f"--job: no {', '.join(missing)} (one entry of 'plan --json' jobs, as it is)")
    chosen = spec or job.get("spec")
    if not isinstance(chosen, str) or not chosen:
        raise BadInput("--job: the job names no spec; pass SPEC (a requirement, an sdist or a folder)")
    cells = job["cells"]
    if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
        raise BadInput(f"--job: cells {cells!r} is not a list of GPUs (['sm80', 'sm89'])")
    declared = str(job.get("TORCH_CUDA_ARCH_LIST", ""))
    request = request_from_flags(
        matrix,
        chosen,
        str(job["torch"]),
        str(job["cuda"]),
        str(job.get("python-tag") or job["python"]),
        str(job["platform"]),
        [c.removeprefix("sm") for c in cells],
        ptx=declared.endswith("+PTX"),
        glibc=str(job["glibc"]) if job.get("glibc") else None,
    )
    if declared and declared != request.arch_list:
        raise BadInput(
            f"--job: TORCH_CUDA_ARCH_LIST {declared} is not the arch list of its cells "
            f"({', '.join(cells)}: {request.arch_list})"
        )
    package, version = job.get("package"), job.get("version")
    try:  # the job's release: a checkout given as SPEC must make it too, or its wheel holds no cell of the plan
        pinned = Version(version) if isinstance(version, str) and version else None
    except InvalidVersion as e:
        raise BadInput(f"--job: version {version!r} is not a version") from e
    return replace(request, package=canonicalize_name(package) if isinstance(package, str) and package else None,
                   version=pinned).expecting()  # fmt: skip


# --- nvcc and MAX_JOBS ---------------------------------------------------------------------------


def check_nvcc(nvcc: Nvcc, cuda: MajorMinor) -> str | None:
    """BadInput when nvcc's CUDA major is not the combo's; the warning line (torch's words) for a minor."""
    want = format_version(cuda)
    if nvcc.release[0] != cuda[0]:
        raise BadInput(
            f"{nvcc} cannot build for CUDA {want} (the combo's torch is a cu{format_cuda(cuda)} build): the "
            f"CUDA majors differ, and torch's cpp_extension refuses that; set CUDA_HOME to a CUDA {cuda[0]} toolkit"
        )
    if nvcc.release != cuda:
        return (
            f"{nvcc} has a minor version mismatch with the CUDA {want} that was used to compile the combo's "
            "PyTorch; most likely this shouldn't be a problem (torch's own words)"
        )
    return None


def max_jobs(cores: int, memory: int | None, user: str | None) -> tuple[int | str, str]:
    """MAX_JOBS and why: the user's value wins; else the cores, capped at one job per 4 GiB of memory."""
    if user:
        return user, "MAX_JOBS from the environment"
    if memory is None:
        return max(1, cores), f"{cores} cores (memory unknown)"
    jobs = max(1, min(cores, memory // MEMORY_PER_JOB))
    return jobs, f"{cores} cores, {memory / (1 << 30):.0f} GiB memory at 4 GiB per compile job"
