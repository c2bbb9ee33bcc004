"""Rebuild the nvcc fixtures in this directory and rewrite MANIFEST.json.

    python tests/data/cuda/rebuild.py            # in place: then commit the changed files
    python tests/data/cuda/rebuild.py --out DIR  # elsewhere, to compare

The recipe (every file's nvcc arguments) lives in ``tests/cuda_fixtures.py``; the kernels are ``k.cu`` and
``k2.cu`` here. Needs nvcc (13.x) and binutils' ``strip`` on PATH, and the test extras installed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root, for `tests`

from tests.cuda_fixtures import build_fixtures, commands, write_manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: beside this script)")
    out: Path = parser.parse_args().out
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp)
        build_fixtures(built)
        out.mkdir(parents=True, exist_ok=True)
        for file in commands():
            shutil.copyfile(built / file, out / file)
    manifest = write_manifest(out)
    print(f"{out}: {len(commands())} files rebuilt by nvcc {manifest['nvcc']}")


if __name__ == "__main__":
    main()
