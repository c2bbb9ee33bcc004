"""doctor's verdict against a real GPU, per kind of device code (issue 45 item 8).

One kernel is built in many device-code configurations (SASS alone for each arch, arch- and family-specific
SASS, PTX alone, SASS beside PTX, two SASS archs of other majors), each as a ``.so`` (cudart linked
statically) inside a one-member wheel. On a GPU machine, for each: ``librarian doctor`` of the wheel for the
detected GPU (exit 0: runs, 1: will not), beside what launching the kernel really did (in a child process:
``launch()`` returns the CUDA error code, 0 when the kernel ran and wrote its value). Any disagreement is a
bug. Built here (nvcc), run there (no network, no nvcc needed: what it needs travels in ``build/``)::

    .venv/bin/python scripts/gpu_verdicts.py build            # nvcc: build/gpu_verdicts/*.whl (~15 s)
    python3 scripts/gpu_verdicts.py run [--sm 90]              # on the GPU machine; --sm: verdicts only

Without a GPU, ``run`` prints the verdicts for ``--sm`` and marks every launch "not run (no GPU)".
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "gpu_verdicts"
KERNEL = r"""
#include <cuda_runtime.h>
__global__ void k(int* out) { *out = 42; }
extern "C" int launch(void) {
  int* d = nullptr; int h = 0;
  cudaError_t e = cudaMalloc(&d, sizeof(int));
  if (e != cudaSuccess) return (int)e;
  k<<<1, 1>>>(d);
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (e != cudaSuccess) return (int)e;
  return h == 42 ? 0 : -1;
}
"""


def _gencode(arch: str, code: str) -> list[str]:
    return ["-gencode", f"arch={arch},code={code}"]


# name -> nvcc -gencode flags: what the issue lists, one configuration each
CONFIGS: dict[str, list[str]] = {
    **{f"sm_{a}": _gencode(f"compute_{a}", f"sm_{a}") for a in ("75", "80", "86", "89", "90", "100", "120")},
    "sm_90a": _gencode("compute_90a", "sm_90a"),
    "sm_100f": _gencode("compute_100f", "sm_100f"),
    **{f"ptx_{a}": _gencode(f"compute_{a}", f"compute_{a}") for a in ("75", "90", "90a", "100")},
    "sm_80+ptx_80": _gencode("compute_80", "sm_80") + _gencode("compute_80", "compute_80"),
    "sm_80+sm_120": _gencode("compute_80", "sm_80") + _gencode("compute_120", "sm_120"),
}
ERRORS = {0: "ran", 35: "driver too old", 209: "no kernel image", 222: "unsupported PTX", 218: "invalid PTX",
          100: "no device", 300: "invalid source", 999: "unknown error", -1: "wrong result"}  # fmt: skip


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(name: str, so: bytes, out: Path) -> Path:
    """A one-member wheel ``gv_<name>`` holding ``so`` (written without librarian: a plain build output)."""
    dist = "gv_" + name.replace("+", "_")
    info = f"{dist}-1.0.dist-info"
    files = {
        f"{dist}/_k.so": so,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
    }
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    path = out / f"{dist}-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p, d in files.items():
            z = zipfile.ZipInfo(p, (2026, 1, 1, 0, 0, 0))
            z.external_attr = 0o100755 << 16
            zf.writestr(z, d, zipfile.ZIP_DEFLATED)
    return path


def build(only: list[str], out: Path = OUT) -> int:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("gpu_verdicts: no nvcc on PATH; build where nvcc is", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(KERNEL)
        for name, flags in CONFIGS.items():
            if only and name not in only:
                continue
            so = Path(tmp) / f"{name}.so"
            start = time.monotonic()
            cmd = [
                nvcc,
                "-shared",
                "-Xcompiler",
                "-fPIC",
                "-cudart",
                "static",
                "-o",
                str(so),
                str(src),
                *flags,
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{name}: nvcc failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                return 1
            print(f"built {_wheel(name, so.read_bytes(), out).name} ({time.monotonic() - start:.0f} s)")
    return 0


def _launch(so: Path) -> str:
    """What launching the kernel did, in a child process (a crash or a poisoned context stays there)."""
    code = f"import ctypes, sys; sys.exit(ctypes.CDLL({str(so)!r}).launch() & 0xFF)"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        return "timed out"
    if done.returncode < 0:
        return f"crashed (signal {-done.returncode})"
    err = done.returncode if done.returncode != 255 else -1
    return ERRORS.get(err, f"CUDA error {err}")


def _verdict(wheel: Path, sm: str | None) -> tuple[str, str]:
    """doctor's exit (runs / will not run / may run) and its GPU reason, for the detected GPU (or ``sm``)."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    cmd = [
        sys.executable,
        "-m",
        "librarian",
        "doctor",
        str(wheel),
        "--json",
        "--python",
        python,
        "--torch",
        "2.9",
    ]
    if sm:
        cmd += ["--sm", sm]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    try:
        report = json.loads(done.stdout)["wheels"][0]
    except (ValueError, KeyError, IndexError):
        return "error", (done.stderr.strip().splitlines() or ["?"])[-1]
    gpu = next((v for v in report["verdicts"] if v["demand"] == "gpu"), {})
    runs = {True: "runs", False: "will not run", None: "may run"}[report.get("runs")]
    return runs, gpu.get("reason", "")


def run(sm: str | None, out: Path = OUT) -> int:
    wheels = sorted(out.glob("gv_*.whl"))
    if not wheels:
        print(
            f"gpu_verdicts: nothing in {out}; run 'scripts/gpu_verdicts.py build' where nvcc is",
            file=sys.stderr,
        )
        return 2
    gpu = shutil.which("nvidia-smi") is not None and not sm
    print(f"{'configuration':<16} {'doctor':<13} {'launch':<18} {'agree':<6} doctor's GPU reason")
    disagreements = 0
    with tempfile.TemporaryDirectory() as tmp:
        for wheel in wheels:
            name = wheel.name.split("-", 1)[0].removeprefix("gv_")
            with zipfile.ZipFile(wheel) as zf:
                so = Path(tmp) / f"{name}.so"
                so.write_bytes(zf.read(next(n for n in zf.namelist() if n.endswith("_k.so"))))
            verdict, reason = _verdict(wheel, sm)
            launched = _launch(so) if gpu else "not run (no GPU)"
            agree = "-" if not gpu else "yes" if (verdict == "runs") == (launched == "ran") else "NO"
            disagreements += agree == "NO"
            print(f"{name:<16} {verdict:<13} {launched:<18} {agree:<6} {reason[:90]}")
    print(f"{len(wheels)} configuration(s), {disagreements} disagreement(s)")
    return 1 if disagreements else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the configurations with nvcc into build/gpu_verdicts")
    b.add_argument("--only", action="append", default=[], help="one configuration (repeatable)")
    r = sub.add_parser("run", help="doctor's verdict beside the launch, per configuration")
    r.add_argument("--sm", help="verdicts for this GPU, launching nothing (no GPU at hand)")
    for p in (b, r):
        p.add_argument("--out", type=Path, default=OUT, help=f"the wheels' folder (default {OUT})")
    args = parser.parse_args()
    return build(args.only, args.out) if args.cmd == "build" else run(args.sm, args.out)


if __name__ == "__main__":
    sys.exit(main())
