"""Write ``librarian/data/stable_abi.toml`` from the headers of every released torch.

    .venv/bin/python scripts/make_stable_abi.py [--index https://pypi.org/simple/torch/]

For each torch line from 2.9 (the first a stable-ABI build runs on) through the newest on the index, the
shim headers of its first release's wheel (``X.Y.0``, its smallest wheel) are read by range requests (a few
hundred KB each, never the wheel) and every ``AOTI_TORCH_EXPORT`` function gets the newest of its
``TORCH_FEATURE_VERSION`` guard and the first release that declares it. Each line's wheel and sha256 are
recorded in ``[sources]``. Run it the day a torch release lands (22 Dec: 2.16), or let users run
``librarian matrix refresh --shims released``, which writes the same table to their override.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from librarian.coords import format_version
from librarian.ops.released_shims import PYPI_TORCH, read_released
from librarian.stable_abi import render_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default=PYPI_TORCH, help="a PEP 691 JSON page of torch (default: PyPI's)")
    args = parser.parse_args()
    table = read_released(args.index, say=print)
    text = render_table(
        table.since,
        source=f"the shim headers of released torch wheels ({args.index}), read by scripts/make_stable_abi.py",
        read=datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        through=format_version(table.through),
        sources={format_version(w.line): w.source for w in table.wheels},
    )
    (ROOT / "librarian" / "data" / "stable_abi.toml").write_text(text, encoding="utf-8")
    print(f"{len(table.since)} functions, torch 2.9 through {format_version(table.through)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
