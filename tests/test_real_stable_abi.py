"""Opt-in (``-m network``): a real stable-ABI wheel's floor, read from the shim functions it imports, against
the table and against what the wheel itself requires (issue 45 item 1). xformers 0.0.35 from PyPI builds
on torch's stable ABI and says ``Requires-Dist: torch>=2.10``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from librarian.coords import WheelName
from librarian.demands import Wheel
from librarian.demands import torch as torch_demand
from librarian.stable_abi import load_table
from librarian.wheel import inspect_wheel

pytestmark = pytest.mark.network


def test_xformers_floor_is_its_newest_shim_import_and_matches_its_requirement(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
         "3.11", "--platform", "manylinux_2_28_x86_64", "xformers==0.0.35", "-d", str(tmp_path)],
        check=True, timeout=900,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("xformers-*.whl")
    facts = inspect_wheel(wheel)
    need = torch_demand.needs(Wheel(WheelName.parse(wheel.name), facts))
    assert need.binding is torch_demand.Binding.STABLE
    imports = {s for b in facts.binaries if b.links_torch for s in b.shim_symbols}
    table = load_table()
    newest = max(table.since[s] for s in imports if s in table.since)
    assert need.floor is not None and need.floor.line == newest == (2, 10), need.floor
    assert need.serves((2, 10)) and need.serves((2, 16)) and not need.serves((2, 9))
