"""The values a matrix file holds: torch releases and their CUDA lines, arch lists, served rows, platforms.

A matrix file is TOML: ``[[torch]]`` release rows each with ``[[torch.cuda]]`` lines, ``[[arch]]`` rows
(torch's own ``TORCH_CUDA_ARCH_LIST`` per CUDA line) and ``[[served]]`` rows (what PyTorch's wheel index
served, written by ``librarian matrix refresh``). Pure values; the file is read and written by
:mod:`librarian.pytorch.matrix_file`, queried by :mod:`librarian.pytorch.matrix`.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from dataclasses import dataclass

from librarian.coords import GpuArch, MajorMinor, format_version
from librarian.errors import BadInput


class Status(enum.Enum):
    """How PyTorch ships a CUDA line for a torch minor; ordered from most to least official."""

    STABLE = "stable"
    EXPERIMENTAL = "experimental"
    SERVED = "served"  # on download.pytorch.org, though the release matrix does not name it

    @property
    def rank(self) -> int:
        """0 for stable, 1 for experimental, 2 for served."""
        return list(Status).index(self)


class CxxAbi(enum.Enum):
    """The libstdc++ ABI of the Linux torch wheels (``torch.compiled_with_cxx11_abi()``)."""

    PRE_CXX11 = "pre-cxx11"
    CXX11 = "cxx11"


class Platform(enum.Enum):
    """A platform torch CUDA wheels are built for; the wheel tags' many spellings map onto these."""

    LINUX_X86_64 = "linux-x86_64"
    LINUX_AARCH64 = "linux-aarch64"
    WINDOWS_AMD64 = "windows-amd64"

    @property
    def runs_on(self) -> str:
        """A GitHub-hosted runner that builds for this platform (a hint; self-hosted GPUs differ)."""
        return _RUNS_ON[self]

    @property
    def cpu(self) -> str:
        """Its CPU in librarian's vocabulary: ``x86_64``, ``aarch64``."""
        return "aarch64" if self is Platform.LINUX_AARCH64 else "x86_64"

    def container(self, cuda: MajorMinor) -> str:
        """The image a build for CUDA ``cuda`` runs in: PyTorch's own manylinux builders (CUDA and every
        CPython under /opt/python); ``""`` on Windows, where the runner installs the toolkit."""
        image = _BUILDER.get(self)
        return f"{image}:cuda{format_version(cuda)}" if image else ""

    @classmethod
    def parse(cls, text: str) -> Platform:
        """``--platform``'s one vocabulary: PyTorch's name (``linux-x86_64``) or a wheel tag of it
        (``manylinux_2_28_x86_64``, ``linux_aarch64``, ``win_amd64``); ValueError naming both forms."""
        value = _PLATFORM_WORDS.get(text.strip().lower(), text.strip().lower())
        try:
            return cls(value)
        except ValueError:
            found = cls.from_wheel_tag(value)
        if found is None:
            known = ", ".join(p.value for p in cls)
            raise ValueError(
                f"--platform {text}: not a platform torch builds CUDA wheels for ({known}, or a wheel tag of one: "
                "manylinux_2_28_x86_64, win_amd64)"
            )
        return found

    @classmethod
    def of_machine(cls, os: str | None, cpu: str | None) -> Platform | None:
        """The platform of a machine's OS (``sys.platform``'s name) and CPU, where torch builds CUDA wheels for it."""
        return {
            ("linux", "x86_64"): cls.LINUX_X86_64,
            ("linux", "aarch64"): cls.LINUX_AARCH64,
            ("win32", "x86_64"): cls.WINDOWS_AMD64,
        }.get((str(os), str(cpu)))

    @classmethod
    def from_wheel_tag(cls, tag: str) -> Platform | None:
        """``manylinux_2_28_x86_64``/``linux_x86_64`` -> linux-x86_64; ``None`` for other platforms."""
        if tag == "win_amd64":
            return cls.WINDOWS_AMD64
        if re.fullmatch(r"(many)?linux[0-9_]*_(x86_64|aarch64)", tag):  # torch builds no musllinux wheels
            return cls.LINUX_X86_64 if tag.endswith("x86_64") else cls.LINUX_AARCH64
        return None


# The words other commands print for these machines (ls's platform column says windows-x86_64).
_PLATFORM_WORDS = {"windows-x86_64": "windows-amd64", "win-amd64": "windows-amd64", "linux-amd64": "linux-x86_64",
                   "linux-arm64": "linux-aarch64"}  # fmt: skip

_BUILDER = {
    Platform.LINUX_X86_64: "pytorch/manylinux2_28-builder",
    Platform.LINUX_AARCH64: "pytorch/manylinuxaarch64-builder",
}
_RUNS_ON = {
    Platform.LINUX_X86_64: "ubuntu-22.04",
    Platform.LINUX_AARCH64: "ubuntu-22.04-arm",
    Platform.WINDOWS_AMD64: "windows-2022",
}


@dataclass(frozen=True, slots=True)
class CPython:
    """A CPython the wheels are built for: ``cp312``, or ``cp313t`` for the free-threaded build."""

    major: int
    minor: int
    free_threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> CPython:
        """Parse ``cp312``, ``3.12``, ``312``, ``cp313t`` or ``3.13t``."""
        m = re.fullmatch(r"(?:cp)?(\d)\.?(\d{1,2})(t?)", text.strip().lower())
        if m is None:
            raise BadInput(f"{text}: not a CPython version (expected e.g. 3.12, cp312 or 3.13t)")
        return cls(int(m[1]), int(m[2]), m[3] == "t")

    @property
    def version(self) -> str:
        """``3.12`` / ``3.13t``: what ``actions/setup-python`` takes."""
        return f"{self.major}.{self.minor}{'t' if self.free_threaded else ''}"

    @property
    def key(self) -> tuple[int, int, bool]:
        """Sort key: numeric, so cp39 sorts before cp310."""
        return self.major, self.minor, self.free_threaded

    def __str__(self) -> str:
        return f"cp{self.major}{self.minor}{'t' if self.free_threaded else ''}"


@dataclass(frozen=True, slots=True)
class CudaRow:
    """One CUDA line of one torch minor, as the release matrix gives it, with its source."""

    line: MajorMinor
    status: Status
    abi: CxxAbi
    python: tuple[CPython, ...]
    platforms: tuple[Platform, ...]
    source: str
    date: dt.date
    python_experimental: tuple[CPython, ...] = ()
    uncertain: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class TorchRow:
    """One torch minor and its CUDA lines."""

    version: MajorMinor
    cuda: tuple[CudaRow, ...]
    note: str = ""
    partial: bool = False  # its CUDA lines are known only in part (the index that lists them was not read)


@dataclass(frozen=True, slots=True)
class ArchRow:
    """The ``TORCH_CUDA_ARCH_LIST`` torch's own wheels were built with, for one CUDA line and platform."""

    cuda: MajorMinor
    platform: Platform
    arch_list: str
    source: str
    torch: tuple[MajorMinor, ...] = ()  # the releases the source covers; empty when not known
    date: dt.date | None = None
    uncertain: tuple[str, ...] = ()
    note: str = ""

    @property
    def sass(self) -> tuple[GpuArch, ...]:
        """The archs torch ships machine code for: ``7.5`` -> sm_75."""
        return tuple(GpuArch.parse(a.removesuffix("+PTX")) for a in self.arch_list.split(";"))

    @property
    def ptx(self) -> tuple[GpuArch, ...]:
        """The archs torch also ships PTX for (``12.0+PTX`` -> compute_120)."""
        return tuple(
            GpuArch.parse("compute_" + a[: -len("+PTX")].replace(".", ""))
            for a in self.arch_list.split(";")
            if a.endswith("+PTX")
        )


@dataclass(frozen=True, slots=True)
class ServedRow:
    """The CPythons PyTorch's wheel index served for one (torch, CUDA, platform), as ``matrix refresh`` read it.

    Keyed by platform too, since the Pythons differ per platform (no free-threaded Windows wheels, say).
    """

    torch: MajorMinor
    cuda: MajorMinor
    platform: Platform
    python: tuple[CPython, ...]
    source: str
    date: dt.date

    @property
    def key(self) -> tuple[MajorMinor, MajorMinor, str]:
        """What a served row is one of: (torch, CUDA, platform)."""
        return self.torch, self.cuda, self.platform.value


@dataclass(frozen=True, slots=True)
class MatrixDoc:
    """The contents of one matrix file (the packaged one or a user override)."""

    torch: tuple[TorchRow, ...] = ()
    arch: tuple[ArchRow, ...] = ()
    served: tuple[ServedRow, ...] = ()
    note: str = ""


def merge_matrix(base: MatrixDoc, override: MatrixDoc) -> MatrixDoc:
    """``base`` with ``override`` laid over it: rows with the same key are replaced, new ones added."""
    torch = {t.version: t for t in base.torch}
    for t in override.torch:
        old = torch.get(t.version)
        rows = {c.line: c for c in (old.cuda if old else ())} | {c.line: c for c in t.cuda}
        # The override's rows are what the index serves now: a partial packaged row stays partial only if
        # the override says nothing of that torch line.
        torch[t.version] = TorchRow(
            t.version, tuple(rows[k] for k in sorted(rows)), t.note or (old.note if old else ""), t.partial
        )
    arch = {(a.cuda, a.platform, a.torch): a for a in base.arch} | {
        (a.cuda, a.platform, a.torch): a for a in override.arch
    }
    served = {s.key: s for s in base.served} | {s.key: s for s in override.served}
    return MatrixDoc(
        tuple(torch[k] for k in sorted(torch)),
        tuple(arch.values()),
        tuple(served[k] for k in sorted(served)),
        override.note or base.note,
    )
