"""What a machine offers to a wheel: GPUs, driver, torch, interpreter tags, C libraries, CPU and OS.

Pure values. ``librarian.probe`` fills a :class:`Machine` in from the running system; tests and CLI flags
build or override one by hand. Every part is a :class:`Probed` value that says how it was found, or why
it is unknown and which flag supplies it.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from packaging.tags import Tag, compatible_tags, cpython_tags

from librarian.coords import GpuArch, MajorMinor, format_version, parse_cuda, parse_torch
from librarian.errors import BadInput
from librarian.gpus import find_gpu, parse_real_sm
from librarian.platforms import check_platform, expand_platform, is_release, linux_platforms, policy_glibcxx

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Probed(Generic[T]):
    """One part of a machine: its value and how it was found, or ``None`` and why it is unknown."""

    value: T | None
    source: str = ""  # how it was found: "NVML", "nvidia-smi", "torch/version.py", "--sm"
    reason: str = ""  # why it is unknown, naming the flag that supplies it

    @classmethod
    def found(cls, value: T, source: str) -> Probed[T]:
        """A part that was found."""
        return cls(value, source)

    @classmethod
    def unknown(cls, reason: str) -> Probed[T]:
        """A part that could not be found; ``reason`` says why and which flag to pass."""
        return cls(None, "", reason)

    @property
    def known(self) -> bool:
        """Whether the value was found."""
        return self.value is not None


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU: its CUDA device number (as torch numbers it), name, compute capability and UUID if known."""

    index: int
    name: str
    capability: MajorMinor
    uuid: str | None = None

    @property
    def arch(self) -> GpuArch:
        """The SASS arch that is native to this GPU: ``sm_89`` for capability 8.9."""
        return GpuArch(*self.capability)

    def __str__(self) -> str:
        return f"GPU {self.index}: {self.name} ({self.arch})"


def one_gpu(
    capability: MajorMinor, source: str, *, index: int = 0, name: str = ""
) -> Probed[tuple[Gpu, ...]]:
    """What a machine with one GPU of ``capability`` offers (named ``sm89`` unless ``name``), said by
    ``source``: a store cell, a variant's GPU, ``--sm``."""
    return Probed.found((Gpu(index, name or f"sm{capability[0]}{capability[1]}", capability),), source)


@dataclass(frozen=True, slots=True)
class TorchInfo:
    """An installed (or assumed) torch: its version, CUDA line (``None``: CPU build), C++ ABI, lib dir."""

    version: str  # "2.8.0+cu128", or "2.9" when given by a flag
    cuda: MajorMinor | None
    cxx11abi: bool | None = None
    lib_dir: Path | None = None  # where libtorch*.so / libc10.so live; None when not installed here
    # Defined dynamic symbols of libtorch*/libc10, read on demand (large); None until read.
    exports: Container[str] | None = field(default=None, compare=False, repr=False)  # name in exports

    @property
    def minor(self) -> MajorMinor:
        """The torch minor, ``(2, 8)``."""
        return parse_torch(self.version)

    def __str__(self) -> str:
        cuda = f"CUDA {format_version(self.cuda)}" if self.cuda else "CPU build"
        return f"torch {self.version} ({cuda})"


def format_glibcxx(version: tuple[int, ...]) -> str:
    """``(3, 4, 30)`` -> ``GLIBCXX_3.4.30``."""
    return "GLIBCXX_" + ".".join(map(str, version))


def parse_major_minor(text: str, what: str) -> MajorMinor:
    """``2.31`` -> ``(2, 31)``; ``what`` names the value in the error."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if m is None:
        raise BadInput(f"{text}: not a {what} version (expected e.g. 2.31)")
    return int(m[1]), int(m[2])


def parse_python(text: str) -> MajorMinor:
    """``3.12``, ``312`` or ``cp312`` -> ``(3, 12)``."""
    raw = text.strip().lower().removeprefix("cp").removeprefix("py")
    if m := re.fullmatch(r"(\d)\.?(\d{1,2})", raw):
        return int(m[1]), int(m[2])
    raise BadInput(f"{text}: not a Python version (expected e.g. 3.12)")


def interpreter_tags(python: MajorMinor, platforms: Iterable[str]) -> tuple[Tag, ...]:
    """The tags CPython ``python`` accepts on ``platforms``, in pip's priority order."""
    plats = list(platforms)
    return (
        *cpython_tags(python, platforms=plats),
        *compatible_tags(python, f"cp{python[0]}{python[1]}", plats),
    )


def _platforms_of(tags: Iterable[Tag]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.platform for t in tags if t.platform != "any"))


# What each part says when nothing found it: the flag that supplies it.
_UNKNOWN_GPUS: Probed[tuple[Gpu, ...]] = Probed.unknown("no GPU found; pass --sm")
_UNKNOWN_DRIVER_CUDA: Probed[MajorMinor] = Probed.unknown("no GPU driver found; pass --driver")
_UNKNOWN_TORCH: Probed[TorchInfo] = Probed.unknown("torch is not installed; pass --torch")
_UNKNOWN_CUDA: Probed[MajorMinor] = Probed.unknown("no CUDA build of torch found; pass --cuda")
_UNKNOWN_PYTHON_TAGS: Probed[tuple[Tag, ...]] = Probed.unknown("interpreter tags unknown; pass --python")
_UNKNOWN_PYTHON: Probed[tuple[int, ...]] = Probed.unknown("Python version unknown; pass --python")
_UNKNOWN_INTERPRETER: Probed[str] = Probed.unknown("no interpreter was probed; pass --python PATH")
_UNKNOWN_SEARCH_PATH: Probed[tuple[str, ...]] = Probed.unknown(
    "no interpreter was probed; pass --python PATH"
)
_UNKNOWN_GLIBC: Probed[MajorMinor] = Probed.unknown("glibc not found; pass --glibc")
_UNKNOWN_GLIBCXX: Probed[tuple[int, ...]] = Probed.unknown("libstdc++ not found")
_UNKNOWN_CPU: Probed[str] = Probed.unknown("CPU arch unknown")
_UNKNOWN_OS: Probed[str] = Probed.unknown("OS unknown")


@dataclass(frozen=True, slots=True)
class Machine:
    """What one machine offers. Build by hand in tests, by :func:`librarian.probe.detect_machine` in use."""

    gpus: Probed[tuple[Gpu, ...]] = _UNKNOWN_GPUS
    selected: int = 0  # the index of the GPU judged (CUDA device 0 unless told)
    driver_cuda: Probed[MajorMinor] = _UNKNOWN_DRIVER_CUDA
    torch: Probed[TorchInfo] = _UNKNOWN_TORCH
    cuda: Probed[MajorMinor] = _UNKNOWN_CUDA
    python_tags: Probed[tuple[Tag, ...]] = _UNKNOWN_PYTHON_TAGS
    python: Probed[tuple[int, ...]] = _UNKNOWN_PYTHON  # the interpreter's version, for Requires-Python
    interpreter: Probed[str] = _UNKNOWN_INTERPRETER  # the target interpreter's path: what pull --install runs
    search_path: Probed[tuple[str, ...]] = _UNKNOWN_SEARCH_PATH  # its sys.path: where doctor --env looks
    glibc: Probed[MajorMinor] = _UNKNOWN_GLIBC
    glibcxx: Probed[tuple[int, ...]] = _UNKNOWN_GLIBCXX
    cpu: Probed[str] = _UNKNOWN_CPU
    os: Probed[str] = _UNKNOWN_OS

    def impossible(self) -> str | None:
        """Why no machine like this one exists (a Jetson GPU beside an x86_64 CPU, a CUDA line its drivers
        never reach), or None; the GPUs' CPUs and driver reach are data (``librarian/data/gpus.toml``)."""
        gpu = self.gpu
        known = find_gpu(gpu.capability) if gpu is not None else None
        if known is None:
            return None
        gpu_words = f"{known.examples} (sm{known.arch.sm})"
        cpu = self.cpu.value
        if cpu is not None and (problem := known.cpu_problem(frozenset({cpu}))):
            return f"{gpu_words} {problem}, not {cpu}"
        for what, line in (("driver", self.driver_cuda.value), ("torch", self.cuda.value)):
            if line is not None and (problem := known.driver_problem(line)):
                return f"{gpu_words} {problem}: no {what} of CUDA {format_version(line)} runs there"
        return None

    @property
    def gpu(self) -> Gpu | None:
        """The selected GPU, if any GPU is known."""
        for g in self.gpus.value or ():
            if g.index == self.selected:
                return g
        return None

    def with_overrides(
        self,
        *,
        sm: str | None = None,
        gpu: int | None = None,
        torch: str | None = None,
        cuda: str | None = None,
        python: str | None = None,
        platform: str | None = None,
        glibc: str | None = None,
        driver: str | None = None,
    ) -> Machine:
        """This machine with the command line's ``--sm --gpu --torch --cuda --python --platform --glibc --driver``.

        Flags win over detection; a flag that changes torch's version or CUDA line drops what was read from
        the installed torch's libraries, since those describe another build.
        """
        m = self
        if gpu is not None:
            if sm is None and self.gpus.known and not any(g.index == gpu for g in self.gpus.value or ()):
                raise BadInput(f"--gpu {gpu}: no such GPU (found {len(self.gpus.value or ())})")
            m = replace(m, selected=gpu)
        if sm is not None:
            arch = parse_real_sm(sm)
            m = replace(m, gpus=one_gpu(arch.capability, "--sm", index=m.selected, name=f"--sm {sm}"))
        if driver is not None:
            m = replace(m, driver_cuda=Probed.found(parse_cuda(driver), "--driver"))
        if cuda is not None:
            m = replace(m, cuda=Probed.found(parse_cuda(cuda), "--cuda"))
        if torch is not None or cuda is not None:
            m = replace(m, torch=_override_torch(m.torch, torch, m.cuda.value))
        if platform is not None:  # the machine it names: its CPU, OS and glibc floor (--glibc wins)
            m = _on_platform(m, platform)
        if glibc is not None:
            version = parse_major_minor(glibc, "glibc")
            if not is_release("manylinux", version):  # a glibc no machine has; its tags would be endless
                raise BadInput(
                    f"--glibc {glibc[:40]}: glibc {version[0]}.{version[1]} is no release a machine runs"
                )
            m = replace(m, glibc=Probed.found(version, "--glibc"))
            if platform is not None:  # the described machine's libstdc++ follows the glibc it is said to have
                m = replace(m, glibcxx=_policy(version))
        if python is not None or platform is not None or glibc is not None:
            m = replace(m, python_tags=_override_tags(m, python, platform, glibc is not None))
        if python is not None:
            m = replace(m, python=Probed.found(parse_python(python), "--python"))
        return m


def _on_platform(m: Machine, platform: str) -> Machine:
    """``m`` on the machine ``--platform`` names: its CPU, its OS, its glibc floor and its policy's libstdc++
    (a described machine's, never this host's); a platform that names no glibc says so."""
    named = check_platform(platform)
    if named.cpu is not None:
        m = replace(m, cpu=Probed.found(named.cpu, "--platform"))
    if named.os is not None:
        m = replace(m, os=Probed.found(named.os, "--platform"))
    if named.glibc is not None:
        return replace(m, glibc=Probed.found(named.glibc, "--platform"), glibcxx=_policy(named.glibc))
    if named.os == "linux":  # linux_x86_64 or musllinux: no glibc floor said
        musl = platform.startswith("musllinux")
        why = "musl, no glibc" if musl else f"--platform {platform} names no glibc; pass --glibc"
        return replace(
            m, glibc=Probed.unknown(why), glibcxx=Probed.unknown(f"--platform {platform} names no libstdc++")
        )
    if named.os is not None:
        os_name = {"win32": "Windows", "darwin": "macOS"}.get(named.os, named.os)
        return replace(m, glibc=Probed.unknown(f"no glibc on {os_name}"),
                       glibcxx=Probed.unknown(f"no libstdc++ on {os_name}"))  # fmt: skip
    return m


def _policy(glibc: MajorMinor) -> Probed[tuple[int, ...]]:
    found = policy_glibcxx(glibc)
    if found is None:
        return Probed.unknown(f"no manylinux policy for glibc {glibc[0]}.{glibc[1]}")
    return Probed.found(found, f"the manylinux policy of glibc {glibc[0]}.{glibc[1]}")


def _override_torch(
    current: Probed[TorchInfo], version: str | None, cuda: MajorMinor | None
) -> Probed[TorchInfo]:
    installed = current.value
    if version is not None:
        parse_torch(version)  # refuse a bad flag now, not at judging time
    new_version = version or (installed.version.split("+")[0] if installed else None)
    if new_version is None:
        return current  # only --cuda, no torch known: Machine.cuda carries it
    if installed is not None and installed.minor == parse_torch(new_version) and installed.cuda == cuda:
        return current  # the flags describe the installed build: keep its ABI and libraries
    return Probed.found(TorchInfo(new_version, cuda), "--torch" if version else "--cuda")


def _override_tags(
    m: Machine, python: str | None, platform: str | None, glibc_given: bool
) -> Probed[tuple[Tag, ...]]:
    current = m.python_tags.value or ()
    if python is not None:
        py = parse_python(python)
    elif current and (
        interp := next((t.interpreter for t in current if t.interpreter.startswith("cp")), None)
    ):
        py = parse_python(interp)
    else:
        raise BadInput("--platform/--glibc: the Python version is unknown here; pass --python too")
    if platform is not None:
        platforms = expand_platform(platform)
    elif glibc_given and m.cpu.value is not None:
        platforms = linux_platforms(m.glibc.value, m.cpu.value)
    elif current:
        platforms = _platforms_of(current)
    else:
        raise BadInput("--python: the platform is unknown here; pass --platform too")
    flags = " ".join(
        f for f, given in (("--python", python), ("--platform", platform), ("--glibc", glibc_given)) if given
    )
    return Probed.found(interpreter_tags(py, platforms), flags)


def one_gpu_machine(capability: MajorMinor, source: str, cuda: MajorMinor | None = None) -> Machine:
    """A machine known only by its one GPU (and ``cuda``, the CUDA line that picks among a wheel's builds):
    what a store cell, a variant's GPU or a real GPU of the table is judged as."""
    machine = Machine(gpus=one_gpu(capability, source))
    return machine if cuda is None else replace(machine, cuda=Probed.found(cuda, source))
