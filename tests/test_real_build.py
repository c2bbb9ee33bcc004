"""Opt-in (``-m network``): ``librarian build`` of a real PyTorch CUDA extension against a real CUDA torch.

``tests/data/torchkern`` is the smallest ``CUDAExtension`` (one kernel, one ``at::Tensor`` binding). It is
built for two cells against PyPI's torch 2.14 (a CUDA 13.0 build: the major of this machine's nvcc) in a
build environment librarian makes, with torch and its CUDA libraries downloaded from PyPI (some GB). Then
the judgement reads the result from its bytes: bound to exactly torch 2.14, CUDA 13, the two cells; pull
and doctor agree, and a target environment with another torch minor is refused.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import HERE_PYTHON, stand_in_torch
from tests.conftest import Run

pytestmark = pytest.mark.network

TORCHKERN = Path(__file__).resolve().parent / "data" / "torchkern"
PYTHON = HERE_PYTHON
MACHINE = ("--python", PYTHON, "--platform", "linux_x86_64", "--cuda", "13.0")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: this compiles")
def test_a_real_torch_cuda_extension_is_built_filed_and_judged_by_its_bytes(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LIBRARIAN_BUILD_CACHE")  # the compile cache as a user gets it: on, ccache from PyPI
    monkeypatch.delenv("CUDA_HOME", raising=False)
    # PyPI's torch is a CUDA build (13.0 for 2.14); the machine's pip configuration is left as it is
    monkeypatch.setenv("LIBRARIAN_TORCH_INDEX", "https://pypi.org/simple")
    src = tmp_path / "torchkern"
    shutil.copytree(TORCHKERN, src)
    argv = ("--torch", "2.14", "--cuda", "13.0", "--python", PYTHON, "--sm", "80", "--sm", "89")
    plan = ("plan", "torchkern==0.1.0", *argv, "--repo", "store", "--json")
    assert [j["cells"] for j in json.loads(run(*plan).out)["jobs"]] == [["sm80", "sm89"]]
    built = run("build", str(src), *argv, "--repo", "store", "--create")
    compiled = (
        built.err
    )  # what the compile said (a rerun for the glibc floor files the kept wheel, uncompiled)
    glibc: tuple[str, ...] = ()
    if built.code == 2 and "the floor plan counts at" in built.err:
        # Built on a host newer than torch's glibc 2.28: refused with the floor it needs, nothing filed;
        # held once --glibc says so on both build and plan.
        floor = built.err.split(" needs GLIBC_")[1].split(" ")[0]
        assert f"pass --glibc {'.'.join(floor.split('.')[:2])} to both build and plan" in built.err
        assert not (tmp_path / "store").exists() or not list((tmp_path / "store").rglob("*.whl"))
        glibc = ("--glibc", ".".join(floor.split(".")[:2]))
        built = run("build", str(src), *argv, *glibc, "--repo", "store", "--create")
    assert built.code == 0, built.err
    assert "TORCH_CUDA_ARCH_LIST=8.0;8.9" in compiled and "using nvcc 13." in compiled
    cold = [x for x in compiled.splitlines() if "compile cache (ccache, " in x]
    assert cold and " 0 of " in cold[0], compiled
    # the same source again, into another store: every compile from the cache (issue 55)
    again = run("build", str(src), *argv, *glibc, "--repo", "store2", "--create", "--json")
    assert again.code == 0, again.err
    served = json.loads(again.out)["compile_cache"]
    assert served["tool"] == "ccache" and served["hits"] >= 1 and served["misses"] == 0, served
    record = json.loads(again.out)["build"]
    assert record["toolchain"]["torch"].startswith("2.14.") and record["source"]["kind"] == "folder"
    after = json.loads(run(*plan, *glibc).out)  # plan -> build -> plan: the cells are held
    assert after["jobs"] == [] and sorted(h["sm"] for h in after["held"]) == ["80", "89"]
    stored = sorted((tmp_path / "store").rglob("*.whl"))
    assert sorted(p.relative_to(tmp_path / "store").parts[1] for p in stored) == ["sm80", "sm89"]
    assert all(p.name.startswith("torchkern-0.1.0+cu130torch2.14-") for p in stored)

    facts = json.loads(run("inspect", str(stored[0]), "--json").out)
    text = json.dumps(facts)
    assert "exact" in text and "libc10.so" in text and "sm_80" in text and "sm_89" in text, text[:2000]

    # doctor: runs with torch 2.14 on an sm_89 GPU; not with torch 2.13 (the mangled c10 symbols)
    runs = run("doctor", str(stored[0]), "--sm", "89", "--torch", "2.14", *MACHINE)
    assert runs.code == 0, runs.out + runs.err
    other = run("doctor", str(stored[0]), "--sm", "89", "--torch", "2.13", *MACHINE)
    assert other.code == 1 and "undefined symbol" in other.out, other.out

    # pull: served for 2.14 on both GPUs, refused for a target environment with torch 2.13
    for sm in ("80", "89"):
        got = run(
            "pull", "torchkern", "--sm", sm, "--torch", "2.14", *MACHINE, "--repo", "store", "-o", f"p{sm}"
        )
        assert got.code == 0, got.err
    venv = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = next(stand_in_torch(tmp_path / "t213", "2.13.0+cu130").glob("*.whl"))
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", wheel], check=True)
    refused = run("pull", "torchkern", "--sm", "89", "--python", str(venv), "--repo", "store", "-o", "p")
    assert refused.code == 1, refused.err
    assert "torch 2.13" in refused.err and "torch" in refused.err.lower()
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())
