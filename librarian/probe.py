"""Detect this machine: GPUs and driver, installed torch, interpreter tags, glibc, libstdc++, CPU, OS.

The one impure module of the judging path. Every part degrades to "unknown, and why" instead of raising:
a laptop without a GPU, a container without torch, musl: all must still get a report. Torch is read from
its installed files, never imported (importing it takes seconds and may itself fail on this machine).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from packaging.tags import Tag, sys_tags

from librarian.coords import MajorMinor, canonical_cpu, parse_cuda
from librarian.elf import dynamic_symbols, version_definitions
from librarian.errors import BadBinary
from librarian.machine import Gpu, Machine, Probed, TorchInfo, interpreter_tags, linux_platforms
from librarian.target import Target, TargetFacts, probe_target

log = logging.getLogger(__name__)

T = TypeVar("T")
Loader = Callable[[str], Any]  # ctypes.CDLL, or a fake in tests
GpuFind = tuple[tuple[Gpu, ...], "MajorMinor | None"]

NO_GPU = "no GPU found; pass --sm"
NO_DRIVER = "no GPU driver found; pass --driver"
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class ProbeFailed(Exception):
    """One way of finding something did not work; the next is tried."""


def _ok(status: int, call: str) -> None:
    if status != 0:
        raise ProbeFailed(f"{call} returned {status}")


def _cuda_from_int(version: int) -> MajorMinor:
    # NVML and the driver API both write CUDA 12.8 as 12080.
    return version // 1000, (version % 1000) // 10


def gpus_from_nvml(lib: Any) -> GpuFind:
    """GPUs and the driver's CUDA version from NVML (``libnvidia-ml.so.1``)."""
    _ok(lib.nvmlInit_v2(), "nvmlInit_v2")
    try:
        version = ctypes.c_int()
        status = lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.pointer(version))
        driver = _cuda_from_int(version.value) if status == 0 else None
        count = ctypes.c_uint()
        _ok(lib.nvmlDeviceGetCount_v2(ctypes.pointer(count)), "nvmlDeviceGetCount_v2")
        gpus = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            _ok(
                lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.pointer(handle)),
                "GetHandleByIndex",
            )
            major, minor = ctypes.c_int(), ctypes.c_int()
            cc = lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.pointer(major), ctypes.pointer(minor))
            _ok(cc, "nvmlDeviceGetCudaComputeCapability")
            name = ctypes.create_string_buffer(96)
            _ok(lib.nvmlDeviceGetName(handle, name, ctypes.c_uint(96)), "nvmlDeviceGetName")
            uuid = ctypes.create_string_buffer(96)
            get_uuid = getattr(lib, "nvmlDeviceGetUUID", None)
            has_uuid = get_uuid is not None and get_uuid(handle, uuid, ctypes.c_uint(96)) == 0
            text = uuid.value.decode(errors="replace") if has_uuid else None
            gpus.append(Gpu(i, name.value.decode(errors="replace"), (major.value, minor.value), text))
        return tuple(gpus), driver
    finally:
        if shutdown := getattr(lib, "nvmlShutdown", None):
            shutdown()


def gpus_from_driver(lib: Any) -> GpuFind:
    """GPUs and the driver's CUDA version from the CUDA driver API (``libcuda.so.1``)."""
    _ok(lib.cuInit(0), "cuInit")
    version = ctypes.c_int()
    driver = _cuda_from_int(version.value) if lib.cuDriverGetVersion(ctypes.pointer(version)) == 0 else None
    count = ctypes.c_int()
    _ok(lib.cuDeviceGetCount(ctypes.pointer(count)), "cuDeviceGetCount")
    gpus = []
    for i in range(count.value):
        dev = ctypes.c_int()
        _ok(lib.cuDeviceGet(ctypes.pointer(dev), ctypes.c_int(i)), "cuDeviceGet")
        major, minor = ctypes.c_int(), ctypes.c_int()
        for out, attr in (
            (major, _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            (minor, _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        ):
            _ok(
                lib.cuDeviceGetAttribute(ctypes.pointer(out), ctypes.c_int(attr), dev), "cuDeviceGetAttribute"
            )
        name = ctypes.create_string_buffer(256)
        _ok(lib.cuDeviceGetName(name, ctypes.c_int(256), dev), "cuDeviceGetName")
        gpus.append(Gpu(i, name.value.decode(errors="replace"), (major.value, minor.value)))
    return tuple(gpus), driver


def _run(args: list[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        raise ProbeFailed(f"{args[0]}: {e}") from e
    if done.returncode != 0:
        raise ProbeFailed(f"{args[0]} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


def gpus_from_nvidia_smi() -> GpuFind:
    """GPUs from ``nvidia-smi --query-gpu``; the CUDA version from its header."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise ProbeFailed("nvidia-smi is not on PATH")
    query = "--query-gpu=index,name,compute_cap,driver_version,uuid"
    gpus = []
    for line in _run([exe, query, "--format=csv,noheader"]).splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        try:
            major, minor = (int(x) for x in parts[-3].split("."))
            index = int(parts[0])
        except ValueError:
            raise ProbeFailed(f"nvidia-smi: cannot read {line!r}") from None
        uuid = parts[-1] if parts[-1] not in ("", "[N/A]") else None
        gpus.append(Gpu(index, ",".join(parts[1:-3]), (major, minor), uuid))
    driver = None
    try:
        if m := re.search(r"CUDA Version:\s*(\d+\.\d+)", _run([exe])):
            driver = parse_cuda(m[1])
    except ProbeFailed as e:
        log.debug("no CUDA version from nvidia-smi: %s", e)
    return tuple(gpus), driver


def visible_gpus(gpus: tuple[Gpu, ...], visible: str) -> tuple[Gpu, ...] | None:
    """The GPUs a CUDA process sees under ``CUDA_VISIBLE_DEVICES``, renumbered as CUDA numbers them.

    ``visible`` lists indices or ``GPU-`` UUID prefixes; as in CUDA, the first entry that names no GPU (or
    one already named) ends the list. ``None`` when the list cannot be applied here (MIG instances).
    https://docs.nvidia.com/cuda/cuda-c-programming-guide/#env-vars
    """
    picked: list[Gpu] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.startswith("MIG-"):
            return None  # a MIG instance's parent is not known here
        if entry.isdigit():
            hit = next((g for g in gpus if g.index == int(entry)), None)
        elif entry.startswith("GPU-"):
            hit = next((g for g in gpus if g.uuid and g.uuid.startswith(entry)), None)
        else:
            hit = None
        if hit is None or hit in picked:
            break
        picked.append(hit)
    return tuple(replace(g, index=i) for i, g in enumerate(picked))


def _apply_visible(gpus: tuple[Gpu, ...], source: str, visible: str | None) -> Probed[tuple[Gpu, ...]]:
    # NVML and nvidia-smi list every GPU; the driver API already sees only the visible ones.
    if visible is None or source == "CUDA driver API":
        return Probed.found(gpus, source)
    shown = visible_gpus(gpus, visible)
    if shown is None:
        log.debug("CUDA_VISIBLE_DEVICES=%s names MIG instances; judging every GPU", visible)
        return Probed.found(gpus, f"{source}; CUDA_VISIBLE_DEVICES not applied (MIG)")
    if not shown:
        return Probed.unknown(f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU; pass --sm")
    return Probed.found(shown, f"{source}, CUDA_VISIBLE_DEVICES={visible}")


def detect_gpus(
    loader: Loader = ctypes.CDLL, visible: str | None = None
) -> tuple[Probed[tuple[Gpu, ...]], Probed[MajorMinor]]:
    """The GPUs and the driver's CUDA version: NVML, else the driver API, else ``nvidia-smi``.

    ``visible`` is ``CUDA_VISIBLE_DEVICES`` (``None``: unset): the GPUs it hides are dropped and the rest
    numbered from 0, as CUDA and torch number them.
    """
    tried: list[str] = []
    ways: list[tuple[str, Callable[[], GpuFind]]] = [
        ("NVML", lambda: gpus_from_nvml(loader("libnvidia-ml.so.1"))),
        ("CUDA driver API", lambda: gpus_from_driver(loader("libcuda.so.1"))),
        ("nvidia-smi", gpus_from_nvidia_smi),
    ]
    for source, way in ways:
        try:
            gpus, driver = way()
        except (ProbeFailed, OSError, AttributeError, ValueError, TypeError) as e:
            tried.append(f"{source}: {e}")
            continue
        if gpus:
            found_driver = Probed.found(driver, source) if driver else Probed.unknown(NO_DRIVER)
            return _apply_visible(gpus, source, visible), found_driver
        tried.append(f"{source}: no GPUs")
    log.debug("no GPU found: %s", "; ".join(tried))
    return Probed.unknown(NO_GPU), Probed.unknown(NO_DRIVER)


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
    # Prefer the file RECORD lists (a wheel may install torch under another root), else the usual place.
    entry = next((f for f in dist.files or () if f.as_posix() == rel), None)
    path = Path(str(dist.locate_file(entry if entry is not None else rel)))
    return path if path.exists() else None


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


def read_torch_exports(lib_dir: Path) -> frozenset[str]:
    """Every symbol that ``libtorch*.so`` and ``libc10*.so`` in ``lib_dir`` export."""
    exports: set[str] = set()
    for lib in sorted((*lib_dir.glob("libc10*.so*"), *lib_dir.glob("libtorch*.so*"))):
        try:
            exports |= _defined_symbols(lib)
        except Exception as e:  # noqa: BLE001 - a library we cannot read just exports nothing we know of
            log.debug("%s: cannot read symbols: %s", lib, e)
    return frozenset(exports)


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


# --- C libraries ------------------------------------------------------------------------------------------


def detect_glibc() -> Probed[MajorMinor]:
    """glibc's version from ``confstr``; unknown on musl, macOS and Windows."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        text = ""
    if m := re.fullmatch(r"glibc (\d+)\.(\d+).*", text):
        return Probed.found((int(m[1]), int(m[2])), "confstr")
    return Probed.unknown("no glibc here (musl, macOS or Windows?); pass --glibc")


_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
    "/lib",
)


def find_libstdcxx() -> Path | None:
    """The ``libstdc++.so.6`` this process would load: already mapped, else ``ldconfig -p``, else usual dirs."""
    try:
        maps = Path("/proc/self/maps").read_text()
        if m := re.search(r"(/\S*libstdc\+\+\.so\.6[\d.]*)$", maps, re.MULTILINE):
            return Path(m[1])
    except OSError:
        pass
    ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
    if ldconfig is not None:
        try:
            if m := re.search(r"libstdc\+\+\.so\.6 .*=> (\S+)", _run([ldconfig, "-p"])):
                return Path(m[1])
        except ProbeFailed as e:
            log.debug("ldconfig: %s", e)
    return next((p for d in _LIB_DIRS if (p := Path(d) / "libstdc++.so.6").exists()), None)


def read_version_definitions(path: Path) -> tuple[str, ...]:
    """The version names a shared library defines (``.gnu.version_d``): ``GLIBCXX_3.4.30``, ..."""
    with path.open("rb") as f:
        return version_definitions(f)


def detect_glibcxx() -> Probed[tuple[int, ...]]:
    """The highest ``GLIBCXX_x.y.z`` that this machine's libstdc++ defines."""
    path = find_libstdcxx()
    if path is None:
        return Probed.unknown("libstdc++.so.6 not found")
    try:
        names = read_version_definitions(path)
    except (OSError, BadBinary) as e:
        return Probed.unknown(f"{path}: cannot read its version definitions ({e})")
    versions = [tuple(int(x) for x in n[8:].split(".")) for n in names if re.fullmatch(r"GLIBCXX_[\d.]+", n)]
    if not versions:
        return Probed.unknown(f"{path}: defines no GLIBCXX_ versions")
    return Probed.found(max(versions), str(path))


# --- everything -------------------------------------------------------------------------------------------


def _safely(what: str, detect: Callable[[], Probed[T]]) -> Probed[T]:
    try:
        return detect()
    except Exception as e:  # a probe must degrade to "unknown", never stop the report
        log.debug("probing %s failed", what, exc_info=True)
        return Probed.unknown(f"probing {what} failed: {e}")


def detect_machine(
    *, loader: Loader = ctypes.CDLL, torch_path: list[str] | None = None, target: Target | None = None
) -> Machine:
    """This machine, as the ``target`` interpreter sees it (default: this one); never raises but for a bad target.

    GPUs and the driver are the machine's; tags, Python version, torch and its CUDA line are the target's,
    read by one probe run of it (:func:`librarian.target.probe_target`) unless it is this interpreter.
    """
    try:
        gpus, driver = detect_gpus(loader, os.environ.get("CUDA_VISIBLE_DEVICES"))
    except Exception as e:  # noqa: BLE001 - see _safely
        gpus, driver = Probed.unknown(f"{NO_GPU} ({e})"), Probed.unknown(NO_DRIVER)
    first = (gpus.value or (Gpu(0, "", (0, 0)),))[0].index
    if target is not None and not target.own:
        return _target_machine(target, probe_target(target), gpus, first, driver)
    try:
        torch, cuda = _torch_parts(torch_path)
    except Exception as e:  # noqa: BLE001 - see _safely
        torch, cuda = Probed.unknown(f"cannot read torch ({e}); pass --torch"), Probed.unknown("pass --cuda")
    return Machine(
        gpus=gpus,
        selected=first,
        driver_cuda=driver,
        torch=torch,
        cuda=cuda,
        python_tags=_safely("interpreter tags", lambda: Probed.found(tuple(sys_tags()), "packaging.tags")),
        python=Probed.found(tuple(sys.version_info[:3]), "sys.version_info"),
        interpreter=Probed.found(sys.executable, target.how if target else "librarian's own interpreter"),
        glibc=_safely("glibc", detect_glibc),
        glibcxx=_safely("libstdc++", detect_glibcxx),
        cpu=_safely("CPU", lambda: Probed.found(platform.machine(), "platform.machine()")),
        os=Probed.found(sys.platform, "sys.platform"),
    )


def _target_machine(
    target: Target, facts: TargetFacts, gpus: Probed[tuple[Gpu, ...]], first: int, driver: Probed[MajorMinor]
) -> Machine:
    """The machine as another interpreter sees it, from its probe's answer."""
    where = str(target.executable)
    try:
        torch, cuda = _torch_parts(list(facts.path))
    except Exception as e:  # noqa: BLE001 - see _safely
        torch, cuda = Probed.unknown(f"cannot read torch ({e}); pass --torch"), Probed.unknown("pass --cuda")
    glibc = Probed.found(facts.glibc, f"{where}: os.confstr") if facts.glibc else _safely("glibc", detect_glibc)
    if facts.tags is not None:
        tags: Probed[tuple[Tag, ...]] = Probed.found(facts.tags, f"{where}: packaging.tags")
    elif facts.implementation == "cpython" and facts.platform == "linux" and glibc.value is not None:
        # Neither packaging nor pip there: the tags its version, glibc and CPU give, as packaging would list them.
        platforms = linux_platforms(glibc.value, canonical_cpu(facts.machine))
        tags = Probed.found(interpreter_tags(facts.version[:2], platforms), f"{where}: computed (no packaging there)")
    else:
        tags = Probed.unknown(f"{where} has neither packaging nor pip to list its tags; pass --python X.Y --platform")
    return Machine(
        gpus=gpus,
        selected=first,
        driver_cuda=driver,
        torch=torch,
        cuda=cuda,
        python_tags=tags,
        python=Probed.found(facts.version, f"{where}: sys.version_info"),
        interpreter=Probed.found(facts.executable, target.how),
        glibc=glibc,
        glibcxx=_safely("libstdc++", detect_glibcxx),
        cpu=Probed.found(facts.machine, f"{where}: platform.machine()"),
        os=Probed.found(facts.platform, f"{where}: sys.platform"),
    )


def detect_target_torch(target: Target) -> TorchInfo | None:
    """The torch installed for ``target`` (read from its files, never imported); ``None`` if absent."""
    return detect_torch(None if target.own else list(probe_target(target).path))
