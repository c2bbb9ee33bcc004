"""The GPUs and driver of this machine: NVML, the CUDA driver API, or ``nvidia-smi``, as ``CUDA_VISIBLE_DEVICES`` shows them."""

from __future__ import annotations

import ctypes
import logging
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from librarian.coords import MajorMinor, parse_cuda
from librarian.machine import Gpu, Probed

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


# The driver's libraries by OS: Linux's sonames; Windows' DLLs in System32 (nvidia-smi is nvidia-smi.exe,
# which shutil.which finds through PATHEXT).
_LIBRARIES = {"win32": ("nvml.dll", "nvcuda.dll")}
_LINUX_LIBRARIES = ("libnvidia-ml.so.1", "libcuda.so.1")
NO_CUDA_ON_MACOS = "macOS has no CUDA (no NVIDIA GPU); pass --sm to describe another machine"


def detect_gpus(
    loader: Loader = ctypes.CDLL, visible: str | None = None, platform: str = sys.platform
) -> tuple[Probed[tuple[Gpu, ...]], Probed[MajorMinor]]:
    """The GPUs and the driver's CUDA version: NVML, else the driver API, else ``nvidia-smi``.

    ``visible`` is ``CUDA_VISIBLE_DEVICES`` (``None``: unset): the GPUs it hides are dropped and the rest
    numbered from 0, as CUDA and torch number them. ``platform`` is ``sys.platform``: on macOS nothing is
    tried; on Windows the driver's DLLs are loaded by their Windows names.
    """
    if platform == "darwin":
        return Probed.unknown(NO_CUDA_ON_MACOS), Probed.unknown(NO_CUDA_ON_MACOS)
    nvml, cuda = _LIBRARIES.get(platform, _LINUX_LIBRARIES)
    tried: list[str] = []
    ways: list[tuple[str, Callable[[], GpuFind]]] = [
        ("NVML", lambda: gpus_from_nvml(loader(nvml))),
        ("CUDA driver API", lambda: gpus_from_driver(loader(cuda))),
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
