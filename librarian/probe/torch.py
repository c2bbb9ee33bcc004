"""The installed torch, read from its files (never imported): version, CUDA line, C++ ABI, exported symbols."""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Container
from dataclasses import replace
from pathlib import Path

from librarian.coords import MajorMinor, parse_cuda
from librarian.machine import Machine, Probed, TorchInfo

log = logging.getLogger(__name__)

# --- torch, from its files --------------------------------------------------------------------------------


def _find_torch(path: list[str] | None) -> importlib.metadata.Distribution | None:
    found = importlib.metadata.distributions(name="torch", path=path) if path else None
    if path is not None:
        return next(iter(found or ()), None)
    try:
        return importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _locate(dist: importlib.metadata.Distribution, rel: str) -> Path | None:
    # The usual place first (no walk over torch's ~15,000 RECORD rows), else the file RECORD lists (a wheel
    # may install torch under another root).
    usual = Path(str(dist.locate_file(rel)))
    if usual.exists():
        return usual
    entry = next((f for f in dist.files or () if f.as_posix() == rel), None)
    path = Path(str(dist.locate_file(entry))) if entry is not None else None
    return path if path is not None and path.exists() else None


def _cuda_from_version_py(text: str) -> tuple[bool, MajorMinor | None]:
    m = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*(None|'[^']*'|\"[^\"]*\")", text, re.MULTILINE)
    if m is None:
        return False, None
    return True, (None if m[1] == "None" else parse_cuda(m[1].strip("'\"")))


def _cxx11abi(dist: importlib.metadata.Distribution, lib_dir: Path | None) -> bool | None:
    # TorchConfig.cmake passes -D_GLIBCXX_USE_CXX11_ABI=0/1 on to extension builds: cheap, plain text.
    cmake = _locate(dist, "torch/share/cmake/Torch/TorchConfig.cmake")
    if cmake is not None and (
        m := re.search(r"_GLIBCXX_USE_CXX11_ABI=([01])", cmake.read_text(errors="replace"))
    ):
        return m[1] == "1"
    libc10 = lib_dir / "libc10.so" if lib_dir else None
    return cxx11abi_from_library(libc10) if libc10 is not None and libc10.exists() else None


def cxx11abi_from_library(path: Path) -> bool | None:
    """Whether a C++ library was built with the new ABI: its exports name ``std::__cxx11`` types."""
    try:
        defined = _defined_symbols(path)
    except Exception as e:  # noqa: BLE001 - an unreadable library leaves the ABI unknown, not a crash
        log.debug("%s: cannot read symbols: %s", path, e)
        return None
    return any("cxx11" in s for s in defined) if defined else None


def _defined_symbols(path: Path) -> frozenset[str]:
    with path.open("rb") as f:
        # Imported here, not at the top: a pull or doctor that reads no library's symbols starts without it.
        from librarian.wheel import dynamic_symbols

        return dynamic_symbols(f)[0]


def read_torch(dist: importlib.metadata.Distribution) -> tuple[TorchInfo, str]:
    """Torch as installed: version, CUDA line, ABI, lib dir; plus where the CUDA line came from ("" unknown)."""
    version = dist.version
    cuda: MajorMinor | None = None
    source = ""
    version_py = _locate(dist, "torch/version.py")
    if version_py is not None:
        said, cuda = _cuda_from_version_py(version_py.read_text(errors="replace"))
        source = "torch/version.py" if said else ""
    if not source and (m := re.search(r"\+(cu\d{2,3}|cpu)", version)):
        cuda, source = (None if m[1] == "cpu" else parse_cuda(m[1])), "the torch version's label"
    libc10 = _locate(dist, "torch/lib/libc10.so")
    lib_dir = libc10.parent if libc10 else _locate(dist, "torch/lib")
    return TorchInfo(version, cuda, _cxx11abi(dist, lib_dir), lib_dir), source


def detect_torch(path: list[str] | None = None) -> TorchInfo | None:
    """The torch installed in this environment (or on ``path``), read from its files; ``None`` if absent."""
    dist = _find_torch(path)
    return read_torch(dist)[0] if dist is not None else None


def read_torch_exports(lib_dir: Path) -> TorchExports:
    """What ``libtorch*.so`` and ``libc10*.so`` in ``lib_dir`` export, asked by name (their hash tables)."""
    from librarian.wheel import Exports  # the reader: only a check of torch symbols loads it

    tables = []
    for lib in sorted((*lib_dir.glob("libc10*.so*"), *lib_dir.glob("libtorch*.so*"))):
        try:
            with lib.open("rb") as f:
                tables.append(Exports(f))
        except Exception as e:  # noqa: BLE001 - a library we cannot read just exports nothing we know of
            log.debug("%s: cannot read symbols: %s", lib, e)
    return TorchExports(tuple(tables))


class TorchExports:
    """torch's exported symbols, asked one at a time: ``name in exports``."""

    def __init__(self, tables: tuple[Container[str], ...]) -> None:
        self.tables = tables

    def __contains__(self, name: object) -> bool:
        return any(name in t for t in self.tables)


def with_torch_exports(machine: Machine) -> Machine:
    """The machine with its torch's exported symbols read in, where its lib dir is known."""
    torch = machine.torch.value
    if torch is None or torch.lib_dir is None or torch.exports is not None:
        return machine
    info = replace(torch, exports=read_torch_exports(torch.lib_dir))
    return replace(machine, torch=replace(machine.torch, value=info))


def _torch_parts(path: list[str] | None) -> tuple[Probed[TorchInfo], Probed[MajorMinor]]:
    dist = _find_torch(path)
    if dist is None:
        return Probed.unknown("torch is not installed; pass --torch"), Probed.unknown(
            "torch is not installed; pass --cuda"
        )
    info, source = read_torch(dist)
    torch = Probed.found(info, f"{dist.metadata['Name'] or 'torch'} {info.version} metadata")
    if info.cuda is not None:
        return torch, Probed.found(info.cuda, f"torch {info.version}, {source}")
    if source:
        return torch, Probed.unknown(f"torch {info.version} is a CPU build; pass --cuda")
    return torch, Probed.unknown(f"torch {info.version}: its CUDA line is not written down; pass --cuda")


def detect_torch_site(path: list[str] | None = None) -> Path | None:
    """The folder torch's distribution is installed in (a site-packages), on ``path``; ``None`` if absent."""
    dist = _find_torch(path)
    return Path(str(dist.locate_file(""))) if dist is not None else None
