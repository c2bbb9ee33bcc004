"""Rebuild the sample wheels in ``samples/dist/``: ``tinykern``, a real CUDA kernel in a tiny package.

    python samples/build.py            # compile with nvcc, pack cp310/cp311/cp312 wheels
    python samples/build.py --check    # and pip-install one into a temp folder and ctypes-load it

The wheels are UNLABELLED (``tinykern-0.1.0-cp312-cp312-linux_x86_64.whl``), as a build would leave them:
the README's demo labels them with ``librarian retag``. The ``.so`` is not a Python extension (ctypes
loads it), so the three wheels differ only in their tags. Timestamps are fixed so rebuilding with the
same nvcc gives the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
DIST = HERE / "dist"
NAME, VERSION = "tinykern", "0.1.0"
PYTHONS = ("cp310", "cp311", "cp312")
# SASS for Ampere (sm_80, sm_86), Ada (sm_89), Hopper (sm_90); PTX compute_90 lets newer GPUs JIT it.
GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_86,code=sm_86",
    "-gencode=arch=compute_89,code=sm_89",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
]
DATE = (2025, 1, 1, 0, 0, 0)


def compile_library(nvcc: str, out: Path) -> bytes:
    """Compile ``src/tinykern.cu`` into a stripped shared library linked to the shared CUDA runtime."""
    cmd = [
        nvcc,
        "-O2",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-cudart",
        "shared",
        *GENCODE,
        "-Xlinker",
        "--strip-all",
        "-o",
        str(out),
        str(SRC / "tinykern.cu"),
    ]
    print("+", " ".join(cmd))
    subprocess.run(cmd, check=True)
    return out.read_bytes()


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pack(python: str, library: bytes) -> Path:
    """Write ``tinykern-0.1.0-{python}-{python}-linux_x86_64.whl`` with a valid RECORD."""
    tag = f"{python}-{python}-linux_x86_64"
    dist_info = f"{NAME}-{VERSION}.dist-info"
    files: list[tuple[str, bytes, int]] = [
        (f"{NAME}/__init__.py", (SRC / NAME / "__init__.py").read_bytes(), 0o644),
        (f"{NAME}/_tinykern.so", library, 0o755),  # the exec bit, as compilers and pip leave it
        (
            f"{dist_info}/METADATA",
            (
                f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
                "Summary: A tiny CUDA vector-add kernel loaded with ctypes (librarian's sample wheel)\n"
                "License: Apache-2.0\nRequires-Python: >=3.10\n\n"
            ).encode(),
            0o644,
        ),
        (
            f"{dist_info}/WHEEL",
            (
                f"Wheel-Version: 1.0\nGenerator: librarian samples/build.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
            ).encode(),
            0o644,
        ),
    ]
    record = "".join(f"{name},{_digest(data)},{len(data)}\n" for name, data, _ in files)
    files.append((f"{dist_info}/RECORD", f"{record}{dist_info}/RECORD,,\n".encode(), 0o644))
    path = DIST / f"{NAME}-{VERSION}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100000 | mode) << 16
            info.create_system = 3  # unix, so installers honour the mode bits
            zf.writestr(info, data, compresslevel=9)
    return path


def check(wheel: Path) -> None:
    """pip-install ``wheel`` into a temp folder and ctypes-load the library from there."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--target",
                tmp,
                str(wheel),
            ],
            check=True,
        )
        so = Path(tmp, NAME, "_tinykern.so")
        assert os.access(so, os.X_OK), f"{so} lost its exec bit"
        probe = (
            "import tinykern\n"
            "tinykern.load()\n"
            "try:\n    print('devices:', tinykern.device_count())\n"
            "except RuntimeError as e:\n    print('loaded; no GPU here:', e)\n"
        )
        subprocess.run([sys.executable, "-c", probe], check=True, env={**os.environ, "PYTHONPATH": tmp})
        print(f"checked {wheel.name}: pip installed it and ctypes loaded {so.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    parser.add_argument("--check", action="store_true", help="pip-install and load one wheel afterwards")
    args = parser.parse_args()
    DIST.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        library = compile_library(args.nvcc, Path(tmp) / "_tinykern.so")
    wheels = [pack(python, library) for python in PYTHONS]
    for wheel in wheels:
        print(f"{wheel.relative_to(HERE)}  {wheel.stat().st_size:,} bytes")
    if args.check:
        check(next(w for w in wheels if f"cp{sys.version_info[0]}{sys.version_info[1]}" in w.name))


if __name__ == "__main__":
    main()
