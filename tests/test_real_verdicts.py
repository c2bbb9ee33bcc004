"""Verdicts on real multi-backend wheels from PyPI (opt-in: ``pytest -m network``).

torchao 0.18 loads ``_C_cutlass_90a`` (sm_90a only) on an H100 and ``_C_mxfp8`` (sm_100, PTX compute_120) on
Blackwell; bitsandbytes 0.50.2 loads the one ``libbitsandbytes_cudaXYZ.so`` that matches torch's CUDA. Both
run on those GPUs, which a judgement that asks every device-code member to serve the GPU gets wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.test_real_wheels import _download

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("real-verdicts")
    return {
        "torchao": _download("torchao==0.18.0", "manylinux_2_28_x86_64", where / "torchao"),
        "bitsandbytes": _download("bitsandbytes==0.50.2", "manylinux_2_24_x86_64", where / "bnb"),
    }


def gpu_verdict(run: Run, wheel: Path, *flags: str) -> dict[str, object]:
    result = run("doctor", str(wheel), *flags, "--json")
    assert result.code in (0, 1), result.err
    verdicts = json.loads(result.out)["wheels"][0]["verdicts"]
    return next(v for v in verdicts if v["demand"] == "gpu")  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("sm", "lacking"),
    [("90", "torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so"), ("100", "torchao/_C_cutlass_90a.abi3.so")],
)
def test_torchao_runs_partly_on_hopper_and_blackwell(
    run: Run, wheels: dict[str, Path], sm: str, lacking: str
) -> None:
    v = gpu_verdict(run, wheels["torchao"], "--sm", sm)
    assert v["ok"] is True and v["partly"] == [lacking], v
    assert lacking in str(v["reason"])
    assert gpu_verdict(run, wheels["torchao"], "--sm", "89")["ok"] is False  # neither member has 8.9 code


def test_torchao_is_filed_under_hopper_and_blackwell(run: Run, wheels: dict[str, Path]) -> None:
    result = run("inspect", str(wheels["torchao"]), "--json")
    gpus = json.loads(result.out)["files"][0]["gpus"]
    assert [g["sm"] for g in gpus] == ["sm90", "sm100", "sm103", "sm107"]  # 10.7: Rubin runs sm_100 SASS


def test_bitsandbytes_is_judged_by_the_member_torchs_cuda_loads(run: Run, wheels: dict[str, Path]) -> None:
    met = gpu_verdict(run, wheels["bitsandbytes"], "--sm", "120", "--cuda", "12.8")
    assert met["ok"] is True and "bitsandbytes/libbitsandbytes_cuda118.so" in met["not_loaded"]  # type: ignore[operator]
    unmet = gpu_verdict(run, wheels["bitsandbytes"], "--sm", "120", "--cuda", "11.8")
    assert unmet["ok"] is False and "libbitsandbytes_cuda118.so" in str(unmet["reason"])
