"""Facts: what a wheel's binaries demand, as read from their bytes. Pure values.

Filled in by the inspection code (``librarian.wheel.binaries``), stored in the index, and judged against a
machine by :mod:`librarian.demands`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from librarian.coords import GpuArch, MajorMinor


class BinaryFormat(enum.Enum):
    """The container of a native member: what OS it loads on."""

    ELF = "elf"  # Linux (and other ELF systems)
    PE = "pe"  # Windows .pyd / .dll
    MACHO = "macho"  # macOS .so / .dylib
    CUDA = "cuda"  # a loose device-code member (.cubin, .fatbin, .ptx): loaded by the driver, any host OS
    UNKNOWN = "unknown"

    @property
    def is_host(self) -> bool:
        """Whether a member of this format is host code, loaded by an OS on a CPU (ELF, PE, Mach-O)."""
        return self in (BinaryFormat.ELF, BinaryFormat.PE, BinaryFormat.MACHO)


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One entry of a CUDA fatbinary: SASS (cubin), PTX or LTO-IR for one arch."""

    arch: GpuArch  # kind SASS for cubins, PTX for PTX, LTO for LTO-IR
    relocatable: bool  # from __nv_relfatbin (-rdc / -dlto), not registered at load time
    compression: str  # "none", "lz4", "zstd", "unknown"
    # The CUDA toolkit that built it, where the bytes say it. A PTX entry's is the first CUDA release of its
    # PTX ISA (9.0 for CUDA 13.0): a driver JIT-compiles only ISAs it knows, so it is the driver floor the
    # GPU demand's PTX rule holds a machine to (runs_on: driver >= toolkit), NVIDIA's rule, from the bytes.
    toolkit: MajorMinor | None = None
    debug: bool = False
    payload_size: int = 0
    uncompressed_size: int = 0
    section: str = ""  # the ELF section it was read from (".nv_fatbin", ".ldata"); "" for a loose file
    kernels: bool | None = None  # a cubin: whether it holds any code (a .text.* section); None: not read


@dataclass(frozen=True, slots=True)
class BinaryFacts:
    """What one native member (``.so`` / ``.pyd``), or loose device-code member (``.cubin``), demands."""

    path: str  # POSIX path inside the wheel
    format: BinaryFormat
    cpu: str | None  # "x86_64", "aarch64", "i686", "ppc64le", ...; None if unknown
    sass: tuple[GpuArch, ...] = ()  # executable SASS archs, sorted, duplicates folded
    ptx: tuple[GpuArch, ...] = ()  # executable PTX archs (kind PTX), sorted
    relocatable_sass: tuple[GpuArch, ...] = ()  # from __nv_relfatbin
    relocatable_ptx: tuple[GpuArch, ...] = ()
    lto: tuple[GpuArch, ...] = ()  # LTO-IR entries: opaque, reported as such
    toolkit: MajorMinor | None = None  # highest CUDA toolkit version that built its device code
    glibc: tuple[int, ...] | None = (
        None  # highest GLIBC_x.y[.z] needed, exact (ld-linux* skipped, as auditwheel)
    )
    glibcxx: tuple[int, ...] | None = None  # highest GLIBCXX_x.y.z needed
    cxxabi: tuple[int, ...] | None = None  # highest CXXABI_x.y.z needed
    needed: tuple[str, ...] = ()  # DT_NEEDED, PE imports, Mach-O install names (``@rpath/libc10.dylib``)
    soname: str | None = None
    rpath: tuple[str, ...] = ()  # DT_RPATH / DT_RUNPATH entries
    torch_symbols: tuple[str, ...] = ()  # undefined symbols it needs from libtorch / libc10 (mangled)
    # Whether ``torch_symbols`` is what the bytes import (False: facts from an index written before the
    # index kept them; a member that links torch then counts as bound to its exact torch line).
    torch_symbols_read: bool = True
    # The stable C shim functions it imports (``aoti_torch_*``, ``torch_*``), which set a stable-ABI build's
    # torch floor (``shim_symbols_read`` False: facts from an index written before they were kept).
    shim_symbols: tuple[str, ...] = ()
    shim_symbols_read: bool = True
    # Sections outside .nv_fatbin / __nv_relfatbin whose fatbin blobs were found by a magic scan and
    # counted as executable (libcufft's ".ldata": it loads them with cuModuleLoadData), or "(whole file)"
    # for an ELF file without section headers.
    embedded: tuple[str, ...] = ()
    # Whether it is a Python extension module (defines ``PyInit_*``) rather than a library it loads;
    # None where not read (facts from an older index): the file name decides then.
    extension: bool | None = None
    # Device code that holds no kernel at all (libcufftw's one 872-byte cubin): it serves no GPU and
    # blocks none. Read only where a member's device code is tiny (see librarian.wheel.fatbin).
    no_kernels: bool = False

    @property
    def has_device_code(self) -> bool:
        """Whether this member carries any GPU code at all."""
        return bool(self.sass or self.ptx or self.relocatable_sass or self.relocatable_ptx or self.lto)

    @property
    def has_kernels(self) -> bool:
        """Whether its device code can serve a GPU: there is some, and it is not a stub without kernels."""
        return self.has_device_code and not self.no_kernels

    @property
    def cudart_major(self) -> int | None:
        """The CUDA major of the CUDA runtime it links: ``libcudart.so.12``, ``cudart64_12.dll``
        (``cudart64_110.dll``: 11), ``libcudart.12.dylib``."""
        for lib in self.needed:
            if m := _CUDART.fullmatch(library_name(lib)):
                digits = next(g for g in m.groups() if g)
                return int(digits[:2]) if len(digits) == 3 else int(digits)
        return None

    @property
    def torch_libraries(self) -> tuple[str, ...]:
        """The torch libraries it links: ``libc10.so``, ``libtorch_cpu.so``, ``torch_cpu.dll``, ``c10.dll``."""
        return tuple(lib for lib in self.needed if _links_torch_lib(lib))

    @property
    def cudart_library(self) -> str | None:
        """The CUDA runtime library it links, as it names it (``libcudart.so.12``, ``cudart64_12.dll``)."""
        return next((lib for lib in self.needed if _CUDART.fullmatch(library_name(lib))), None)

    @property
    def links_torch(self) -> bool:
        """Whether it links libtorch / libc10 (``torch_cpu.dll``, ``c10.dll`` on Windows): bound to one torch
        line, or by its stable ABI to later ones too."""
        return any(_links_torch_lib(lib) for lib in self.needed)


@dataclass(frozen=True, slots=True)
class WheelFacts:
    """What a whole wheel demands: the union over its native members, plus what its filename claims."""

    filename: str
    binaries: tuple[BinaryFacts, ...] = field(default=())

    @property
    def archs(self) -> tuple[GpuArch, ...]:
        """Every SASS and PTX arch any member carries, sorted: what the wheel offers, before any judging."""
        return tuple(sorted({a for b in self.binaries for a in (*b.sass, *b.ptx)}, key=arch_order))

    @property
    def glibc(self) -> tuple[int, ...] | None:
        """The wheel's glibc floor: the highest any member needs."""
        return max((b.glibc for b in self.binaries if b.glibc), default=None)

    @property
    def toolkit(self) -> MajorMinor | None:
        """The newest CUDA toolkit that built any of its device code."""
        return max((b.toolkit for b in self.binaries if b.toolkit), default=None)


def arch_order(arch: GpuArch) -> tuple[str, int, int, str]:
    """A sort key for archs of mixed kinds: SASS before PTX (``compute`` sorts before ``sm`` by name)."""
    return ("0" if arch.kind.value == "sm" else arch.kind.value, arch.major, arch.minor, arch.suffix)


def _mm(v: tuple[int, ...] | None) -> str | None:
    return None if v is None else ".".join(str(x) for x in v)


def _parse_mm(v: object) -> tuple[int, ...] | None:
    return None if v in (None, "") else tuple(int(x) for x in str(v).split("."))


def _archs(values: object) -> tuple[GpuArch, ...]:
    if not isinstance(values, list):
        return ()
    return tuple(GpuArch.parse(str(v)) for v in values)


# libcudart.so.12[.8], cudart64_12.dll / cudart64_110.dll, libcudart.12.dylib
# libcudart-<hash>.so.12.0.107: auditwheel's rename of the runtime it bundled (spconv-cu120, cumm-cu120).
_CUDART = re.compile(
    r"libcudart(?:-[0-9a-f]{8})?\.so\.(\d+)(?:\.[\d.]*)?|cudart(?:64|32)_(\d+)\.dll"
    r"|libcudart\.(\d+)(?:\.\d+)*\.dylib"
)


def library_name(lib: str, *, keep_case: bool = False) -> str:
    """The file name a loader looks for (lower case, to match names by; ``keep_case`` to show it): a
    Mach-O install name (``@rpath/libc10.dylib``) and a DT_NEEDED with a path keep their directory in the
    facts; what they link is the last part."""
    name = lib.rsplit("/", 1)[-1]
    return name if keep_case else name.lower()


# torch's own libraries: libtorch.so, libtorch_cpu.so, libc10_cuda.so, libtorch_python.dylib, torch_cpu.dll,
# c10.dll; not a package's own library that shares the prefix (libtorchaudio.so, libtorchvision.so).
_TORCH_LIBRARY = re.compile(r"(?:lib)?(?:torch|c10)(?:_[a-z0-9_]+)?\.(?:so|dylib|dll)(?:\..*)?")


def _links_torch_lib(lib: str) -> bool:
    return _TORCH_LIBRARY.fullmatch(library_name(lib)) is not None


def _links_torch(needed: object) -> bool:
    return isinstance(needed, list) and any(_links_torch_lib(str(lib)) for lib in needed)


def facts_to_json(facts: WheelFacts) -> dict[str, object]:
    """The facts as the index stores them (GPU archs written ``sm_89``, ``compute_80``)."""
    return {
        "archs": [str(a) for a in facts.archs],
        "glibc": _mm(facts.glibc),
        "toolkit": _mm(facts.toolkit),
        "binaries": [
            {
                "path": b.path,
                "format": b.format.value,
                "cpu": b.cpu,
                "sass": [str(a) for a in b.sass],
                "ptx": [str(a) for a in b.ptx],
                "relocatable_sass": [str(a) for a in b.relocatable_sass],
                "relocatable_ptx": [str(a) for a in b.relocatable_ptx],
                "lto": [str(a) for a in b.lto],
                "toolkit": _mm(b.toolkit),
                "glibc": _mm(b.glibc),
                "glibcxx": _mm(b.glibcxx),
                "cxxabi": _mm(b.cxxabi),
                "needed": list(b.needed),
                # only where there are any, so the entries of every other binary stay as they were
                **({"embedded": list(b.embedded)} if b.embedded else {}),
                **({"extension": b.extension} if b.extension is not None else {}),
                **({"no_kernels": True} if b.no_kernels else {}),
                # The symbol that binds a member to one torch line, if any (the first: one is proof enough,
                # and xformers imports thousands): what the torch demand reads back from the index.
                **({"torch_symbols": list(b.torch_symbols[:1])} if b.links_torch or b.torch_symbols else {}),
                # Every shim function a member that links torch imports: a stable-ABI build's floor is the
                # newest among them, by a table that may be refreshed after the wheel was filed.
                **({"shim_symbols": list(b.shim_symbols)} if b.links_torch else {}),
            }
            for b in facts.binaries
        ],
    }


def facts_from_json(filename: str, data: Mapping[str, Any]) -> WheelFacts:
    """Facts back from the index (of the torch symbols, the one that binds a member, where it kept it)."""
    binaries = []
    for b in data.get("binaries", []):
        toolkit = _parse_mm(b.get("toolkit"))
        binaries.append(
            BinaryFacts(
                path=str(b["path"]),
                format=BinaryFormat(b.get("format", "unknown")),
                cpu=b.get("cpu"),
                sass=_archs(b.get("sass")),
                ptx=_archs(b.get("ptx")),
                relocatable_sass=_archs(b.get("relocatable_sass")),
                relocatable_ptx=_archs(b.get("relocatable_ptx")),
                lto=_archs(b.get("lto")),
                toolkit=(toolkit[0], toolkit[1]) if toolkit else None,
                glibc=_parse_mm(b.get("glibc")),
                glibcxx=_parse_mm(b.get("glibcxx")),
                cxxabi=_parse_mm(b.get("cxxabi")),
                needed=tuple(b.get("needed", ())),
                embedded=tuple(b.get("embedded", ())),
                extension=b["extension"] if isinstance(b.get("extension"), bool) else None,
                no_kernels=b.get("no_kernels") is True,
                torch_symbols=tuple(str(x) for x in b.get("torch_symbols", ())),
                # Written for every member that links torch since schema 2: absent there, it was not kept.
                torch_symbols_read="torch_symbols" in b or not _links_torch(b.get("needed", ())),
                shim_symbols=tuple(str(x) for x in b.get("shim_symbols", ())),
                shim_symbols_read="shim_symbols" in b or not _links_torch(b.get("needed", ())),
            )
        )
    return WheelFacts(filename, tuple(binaries))
