"""Wheels around real nvcc-built ``.so`` files, for the end-to-end doctor and pull tests.

:mod:`tests.cuda_fixtures` builds the session's shared ``.so`` fixtures (``multi``, ``ptx``, ``special``, ...);
this adds the few single-arch builds the verdict tests need (SASS for exactly one GPU), built once per
session the same way (a marker file makes the second module reuse them), and puts a ``.so`` into a wheel.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from librarian import probe
from tests.builders import make_wheel
from tests.cuda_fixtures import KERNEL, SHARED, real_sos

# One SASS arch each, no PTX: what a wheel built with TORCH_CUDA_ARCH_LIST="8.6" (say) carries.
SINGLE_ARCHS = ("sm_80", "sm_86", "sm_90", "sm_90a")


def gpu_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shared fixtures plus ``sm_80`` .. ``sm_90a``: one SASS arch each (skips where nvcc is missing)."""
    shared = real_sos(tmp_path_factory)
    directory = tmp_path_factory.getbasetemp() / "cuda-fixtures-single"
    paths = {arch: directory / f"{arch}.so" for arch in SINGLE_ARCHS}
    if (directory / "done").exists():
        return {**shared, **paths}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "k.cu").write_text(KERNEL)

    def build(arch: str) -> None:
        code = f"arch=compute_{arch[3:]},code={arch}"
        cmd = ["nvcc", *SHARED, "-gencode", code, "-o", str(paths[arch]), "k.cu"]
        done = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"nvcc failed for {arch}: {done.stderr.strip()}")

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(build, SINGLE_ARCHS))
    (directory / "done").touch()
    return {**shared, **paths}


def so_wheel(
    directory: Path,
    so: Path | bytes,
    name: str = "kern",
    version: str = "1.0",
    tags: str = "cp311-cp311-linux_x86_64",
) -> Path:
    """A wheel holding ``so`` as ``{name}/_C.so`` (mode 0o755) beside an ``__init__.py``."""
    data = so if isinstance(so, bytes) else so.read_bytes()
    member = f"{name}/_C.so"
    files = {f"{name}/__init__.py": b"", member: data}
    return make_wheel(directory, name, version, tags, files, modes={member: 0o755})


# Two GPUs as ``nvidia-smi --query-gpu=index,name,compute_cap,driver_version,uuid`` lists them.
TWO_GPUS = (
    "0, NVIDIA GeForce RTX 4090, 8.9, 580.65.06, GPU-aaaa",
    "1, NVIDIA H100 80GB HBM3, 9.0, 580.65.06, GPU-bbbb",
)


def isolate_machine(monkeypatch: pytest.MonkeyPatch, bindir: Path, smi_gpus: tuple[str, ...] = ()) -> None:
    """Make the probe see no torch and only a fake ``nvidia-smi`` (failing when ``smi_gpus`` is empty).

    NVML and the driver API are switched off so that a GPU on the test machine does not leak in; the
    rest of the machine (glibc, CPU, interpreter tags) is detected for real.
    """

    def off(*_: object) -> probe.GpuFind:
        raise probe.ProbeFailed("switched off in tests")

    monkeypatch.setattr(probe, "gpus_from_nvml", off)
    monkeypatch.setattr(probe, "gpus_from_driver", off)
    monkeypatch.setattr(probe, "_find_torch", lambda path: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    bindir.mkdir(parents=True, exist_ok=True)
    if smi_gpus:
        rows = "\\n".join(smi_gpus)
        body = (
            'case "$1" in\n'
            f"  --query-gpu=*) printf '{rows}\\n' ;;\n"
            "  *) echo '| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0     |' ;;\n"
            "esac\n"
        )
    else:
        body = (
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"
        )
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + body)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
