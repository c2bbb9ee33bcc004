"""A new demand is one module and one row: ``tests/made_up_demand.py``, added to the table of demands here,
shows up in inspect, doctor, publish, verify and pull with no other change (the promise of
``librarian/demands/table.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from librarian.demands import table
from tests import made_up_demand
from tests.builders import make_wheel
from tests.conftest import Run
from tests.gpu_wheels import isolate_machine
from tests.pe_builders import pe_dll

WINDOWS = "cp312-cp312-win_amd64"
ON_WINDOWS = ("--os", "windows", "--cpu", "x86_64", "--python", "3.12", "--sm", "89", "--torch", "2.9")
LINE = ("--torch", "2.9", "--cuda", "12.8", "--sm", "89")


@pytest.fixture(autouse=True)
def eighth_demand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(table, "DEMANDS", (*table.DEMANDS, made_up_demand.ROW))
    isolate_machine(monkeypatch, tmp_path / "bin")


def nccl_wheel(directory: Path) -> Path:
    pyd = pe_dll(imports={"nccl.dll": ["ncclCommInitRank"], "KERNEL32.dll": ["GetProcAddress"]})
    return make_wheel(directory, "kern", "1.0", WINDOWS, {"kern/__init__.py": b"", "kern/_C.pyd": pyd})


def test_it_reaches_every_command(run: Run, tmp_path: Path) -> None:
    wheel = nccl_wheel(tmp_path / "dist")

    seen = run("inspect", str(wheel))
    assert seen.code == 0, seen.err
    assert "  NCCL      links nccl.dll" in seen.out.splitlines()
    assert "  ! platform win_amd64, but kern/_C.pyd links nccl.dll (NCCL is Linux-only)" in seen.out
    as_json = json.loads(run("inspect", "--json", str(wheel)).out)
    assert as_json["files"][0]["demands"]["NCCL"] == "links nccl.dll"

    doctor = run("doctor", str(wheel), *ON_WINDOWS, "--cuda", "12.8", "--json")
    assert doctor.code == 1, doctor.out + doctor.err
    (report,) = json.loads(doctor.out)["wheels"]
    verdict = next(v for v in report["verdicts"] if v["demand"] == "nccl")
    assert verdict["ok"] is False and verdict["reason"] == "NCCL is Linux-only"

    refused = run("publish", str(wheel), *LINE)
    assert refused.code == 2
    assert "links nccl.dll (NCCL is Linux-only); pass --allow-platform-mismatch" in refused.err
    filed = run("publish", str(wheel), *LINE, "--allow-platform-mismatch")
    assert filed.code == 0, filed.err

    verified = run("verify", "--deep")
    assert verified.code == 0, verified.out
    assert "--allow-platform-mismatch" in verified.out and "NCCL is Linux-only" in verified.out

    missed = run("pull", "kern", *ON_WINDOWS, "--cuda", "12.8", "-o", "out")
    assert missed.code == 1
    assert "NCCL: NCCL is Linux-only" in missed.err


def test_without_the_row_nothing_knows_it(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same wheel, the table as shipped: no command names NCCL (what the row alone added above).
    monkeypatch.setattr(table, "DEMANDS", tuple(r for r in table.DEMANDS if r is not made_up_demand.ROW))
    seen = run("inspect", str(nccl_wheel(tmp_path / "dist")))
    assert seen.code == 0 and "NCCL" not in seen.out
