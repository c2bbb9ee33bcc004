"""Wheels around real nvcc-built ``.so`` files, for the end-to-end doctor and pull tests.

The fixtures (:mod:`tests.cuda_fixtures`, checked in under ``tests/data/cuda/``) include the few
single-arch builds the verdict tests need (``sm_80`` .. ``sm_90a``: SASS for exactly one GPU); this puts a
``.so`` into a wheel and fakes the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from librarian.probe import nvidia as probe_gpus
from librarian.probe import torch as probe_torch
from tests.builders import make_wheel
from tests.cuda_fixtures import real_sos


def gpu_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc fixtures, ``sm_80`` .. ``sm_90a`` (one SASS arch each) among them."""
    return real_sos(tmp_path_factory)


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

    def off(*_: object) -> probe_gpus.GpuFind:
        raise probe_gpus.ProbeFailed("switched off in tests")

    monkeypatch.setattr(probe_gpus, "gpus_from_nvml", off)
    monkeypatch.setattr(probe_gpus, "gpus_from_driver", off)
    monkeypatch.setattr(probe_torch, "_find_torch", lambda path: None)
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
