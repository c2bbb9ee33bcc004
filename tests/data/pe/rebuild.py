"""Rebuild the PE fixtures (``stable.pyd``, ``exact.pyd``) from ``kern.c`` with Debian's mingw-w64, and
record how in ``MANIFEST.json``. Run from anywhere: ``python tests/data/pe/rebuild.py``.

Needs ``x86_64-w64-mingw32-gcc`` and ``-dlltool`` (``apt-get install gcc-mingw-w64-x86-64``); the tests read
the checked-in DLLs and need neither.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FATBIN = HERE.parent / "cuda" / "multi.fatbin"  # nvcc-built: sm_80, compute_80, sm_120f
GCC, DLLTOOL = "x86_64-w64-mingw32-gcc", "x86_64-w64-mingw32-dlltool"


def main() -> None:
    manifest: dict[str, object] = {"fatbin": FATBIN.name, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = FATBIN.read_bytes()
        (work / "fatbin.h").write_text(
            f"static const unsigned char fatbin_bytes[{len(data)}] = {{0}};\n"
            f"#define FATBIN_INIT {{{', '.join(str(b) for b in data)}}}\n"
        )
        libs = []
        for name in ("cudart64_13", "torch_cpu"):
            lib = work / f"lib{name}.a"
            subprocess.run([DLLTOOL, "-d", str(HERE / f"{name}.def"), "-l", str(lib)], check=True)
            libs.append(str(lib))
        for out, exact in (("stable.pyd", 0), ("exact.pyd", 1)):
            cmd = [
                GCC,
                "-shared",
                "-O1",
                "-s",
                f"-DEXACT={exact}",
                "-I",
                str(work),
                "-o",
                str(HERE / out),
                str(HERE / "kern.c"),
                *libs,
            ]
            subprocess.run(cmd, check=True)
            body = (HERE / out).read_bytes()
            manifest["files"][out] = {
                "exact": bool(exact),
                "size": len(body),  # type: ignore[index]
                "sha256": hashlib.sha256(body).hexdigest(),
            }
    version = subprocess.run(
        [GCC, "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    manifest["compiler"] = version
    (HERE / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
