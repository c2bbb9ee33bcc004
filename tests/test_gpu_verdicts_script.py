"""``scripts/gpu_verdicts.py`` (issue 45 item 8): built with the real nvcc, its verdict table for a stated GPU
without one at hand (on a GPU machine it launches each configuration beside doctor's verdict)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_verdicts.py"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: the script builds with it")
def test_the_script_builds_each_configuration_and_prints_doctors_verdicts(tmp_path: Path) -> None:
    only = ["--only", "sm_80", "--only", "ptx_90", "--only", "sm_90a"]
    built = subprocess.run([sys.executable, str(SCRIPT), "build", *only, "--out", str(tmp_path)],
                           capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert sorted(p.name for p in tmp_path.glob("*.whl")) == [
        "gv_ptx_90-1.0-py3-none-linux_x86_64.whl",
        "gv_sm_80-1.0-py3-none-linux_x86_64.whl",
        "gv_sm_90a-1.0-py3-none-linux_x86_64.whl",
    ]
    table = subprocess.run([sys.executable, str(SCRIPT), "run", "--sm", "89", "--out", str(tmp_path)],
                           capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:-1]}
    assert "runs sm_80 SASS" in rows["sm_80"] and "not run (no GPU)" in rows["sm_80"]
    assert rows["ptx_90"].split()[1:4] == ["will", "not", "run"]  # compute_90 PTX never JITs down to 8.9
    assert rows["sm_90a"].split()[1:4] == ["will", "not", "run"]
    assert table.stdout.splitlines()[-1] == "3 configuration(s), 0 disagreement(s)"
