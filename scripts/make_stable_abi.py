"""Write ``librarian/data/stable_abi.toml`` from PyTorch's ``torch/csrc/stable/c/shim_function_versions.txt``.

    .venv/bin/python scripts/make_stable_abi.py shim_function_versions.txt --commit <sha> --through 2.13

The file lists each stable shim function added from 2.10 on with the torch version that added it; every
function it does not list "was available before 2.10.0" (its own header). ``--through``: the newest torch
line the file covers (a function absent from it may be newer than that); ``base``: the first line a
stable-ABI build can run on. ``librarian matrix refresh --shims FILE`` writes the same table to the user's
override from a newer copy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from librarian.stable_abi import parse_versions_file, render_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--commit", required=True, help="the pytorch/pytorch commit the file was read at")
    parser.add_argument("--through", required=True, help="the newest torch line the file covers (2.13)")
    parser.add_argument("--read", required=True, help="the date it was read (YYYY-MM-DD)")
    args = parser.parse_args()
    since = parse_versions_file(args.file.read_text(encoding="utf-8"), str(args.file))
    source = f"pytorch/pytorch torch/csrc/stable/c/shim_function_versions.txt at {args.commit}"
    text = render_table(since, source=source, read=args.read, through=args.through)
    (ROOT / "librarian" / "data" / "stable_abi.toml").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
