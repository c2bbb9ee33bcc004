"""Cells by NVIDIA's rules, end to end: what publish files where, and what pull then finds, on nvcc builds.

A kernel built with PyTorch's usual ``TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0+PTX"`` must land under every real
GPU its SASS serves (an RTX 4090, 8.9, runs sm_86 SASS natively), and nowhere its PTX alone reaches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.gpu_wheels import gpu_sos, isolate_machine, so_wheel

LINE = ("--cuda", "13.0", "--torch", "2.9")
TAGS = "cp312-cp312-linux_x86_64"


@pytest.fixture(scope="session")
def sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gpu_sos(tmp_path_factory)


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")


def test_torch_arch_list_files_every_gpu_its_sass_serves(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    whl = so_wheel(tmp_path / "dist", sos["torch_list"], name="mykern", tags=TAGS)
    published = run("publish", str(whl), *LINE)
    assert published.code == 0, published.err
    house = tmp_path / "wheelhouse"
    assert sorted(p.name for p in (house / "mykern").iterdir()) == ["sm80", "sm86", "sm89", "sm90"]
    assert (house / "pages/sm89-torch2.9-cu130.html").is_file()
    pulled = run("pull", "mykern", "--sm", "89", "--torch", "2.9", "--python", "3.12", "-o", "out")
    assert pulled.code == 0, pulled.err
    assert pulled.out.startswith(
        "mykern/sm89/torch2.9-cu130/mykern-1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl"
    )
    for sm in ("75", "100", "120"):  # older than its SASS; its compute_90 PTX alone reaches the newer ones
        assert run("pull", "mykern", "--sm", sm, *LINE, "--python", "3.12", "-o", "out").code == 1
    assert run("verify", "--deep").code == 0


def test_arch_specific_code_files_only_its_gpu(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    whl = so_wheel(tmp_path / "dist", sos["sm_90a"], name="xkern", tags=TAGS)  # xformers' pattern
    assert run("publish", str(whl), *LINE).code == 0
    assert [p.name for p in (tmp_path / "wheelhouse/xkern").iterdir()] == ["sm90"]


def test_ptx_alone_files_no_cell(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    whl = so_wheel(tmp_path / "dist", sos["ptx"], name="pkern", tags=TAGS)
    result = run("publish", str(whl), *LINE)
    assert result.code == 2 and "PTX alone files no cell" in result.err and "--sm" in result.err
    # words true to its code (issue 52, item 6): it has no SASS at all, and the driver JITs its PTX
    said = "it has no SASS, only PTX (compute_80): the driver JIT-compiles it on sm80 and newer GPUs"
    assert said in result.err and said in run("inspect", str(whl)).out
    # compute_80 JITs on 8.0, but a cell is where a wheel runs natively: --sm 80 needs --trust-sm too
    jit = run("publish", str(whl), *LINE, "--sm", "80")
    assert jit.code == 2 and "only by JIT-compiling PTX" in jit.err and "--trust-sm" in jit.err
    assert run("publish", str(whl), *LINE, "--sm", "80", "--trust-sm").code == 0


@pytest.mark.parametrize(
    ("sm", "says"),
    [
        ("86a", "there is no sm_86a"),
        ("90a", "name the GPU, not a kind of code"),
        ("88", "no GPU of compute capability 8.8"),
    ],
)
@pytest.mark.parametrize("command", ["publish", "pull", "doctor"])
def test_sm_takes_only_gpus_that_exist(
    run: Run, sos: dict[str, Path], tmp_path: Path, command: str, sm: str, says: str
) -> None:
    whl = so_wheel(tmp_path / "dist", sos["sm_80"], tags=TAGS)
    args = {"publish": [str(whl), *LINE], "pull": ["kern", *LINE], "doctor": [str(whl)]}[command]
    result = run(command, *args, "--sm", sm)
    assert result.code == 2 and result.err.count("\n") == 1 and says in result.err, result
    assert not (tmp_path / "wheelhouse").exists()


def test_pull_skips_a_version_whose_requires_python_excludes_the_interpreter(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    data = sos["sm_80"].read_bytes()
    for version, requires in (("1.0", ">=3.9"), ("2.0", ">=3.13")):
        files = {"rp/__init__.py": b"", "rp/_C.so": data}
        whl = make_wheel(
            tmp_path / "dist" / version,
            "rp",
            version,
            "py3-none-linux_x86_64",
            files,
            requires_python=requires,
        )
        assert run("publish", str(whl), *LINE).code == 0
    page = (tmp_path / "wheelhouse/pages/sm80-torch2.9-cu130.html").read_text()
    assert 'data-requires-python="&gt;=3.13"' in page and 'data-requires-python="&gt;=3.9"' in page
    old = run("pull", "rp", "--sm", "80", *LINE, "--python", "3.11", "-o", "out", "--json")
    assert old.code == 0, old.err
    assert json.loads(old.out)["wheels"][0]["path"].endswith("rp-1.0+cu130torch2.9-py3-none-linux_x86_64.whl")
    new = run("pull", "rp", "--sm", "80", *LINE, "--python", "3.13", "-o", "out", "--json")
    assert json.loads(new.out)["wheels"][0]["path"].endswith("rp-2.0+cu130torch2.9-py3-none-linux_x86_64.whl")
    shard = json.loads((tmp_path / "wheelhouse/index/rp.json").read_text())
    assert {w["requires_python"] for w in shard["wheels"]} == {">=3.9", ">=3.13"}
