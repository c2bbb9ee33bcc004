"""publish and verify --deep, end to end, driven by what the wheels' real binaries carry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from librarian.ops.store.verify import NOT_INDEXED
from tests.builders import make_wheel
from tests.conftest import Result, Run
from tests.cuda_fixtures import (
    cubin_bytes,
    fatbin_blob,
    fatbin_entry,
    fixtures_toolkit,
    real_sos,
    so_with_fatbin,
)

LABEL = ("--cuda", "13.0", "--torch", "2.9")  # cu130torch2.9: a combo PyTorch shipped
COMBO = "torch2.9-cu130"
TAGS = "cp312-cp312-linux_x86_64"


@pytest.fixture(scope="session")
def cuda_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc-built fixtures (checked in; rebuilt once per session when asked)."""
    if (version := fixtures_toolkit())[0] != 13:
        pytest.skip(f"these tests label the fixtures cu130; nvcc here is {version[0]}.{version[1]}")
    return real_sos(tmp_path_factory)


def wheel(directory: Path, name: str, members: dict[str, bytes]) -> Path:
    files = {f"{name}/__init__.py": b"", **members}
    return make_wheel(directory, name, "1.0", TAGS, files, modes={m: 0o755 for m in members})


def stored(name: str, sm: str, combo: str = COMBO, label: str = "cu130torch2.9") -> str:
    return f"{name}/sm{sm}/{combo}/{name}-1.0+{label}-{TAGS}.whl"


def one_line_error(result: Result, *needles: str) -> None:
    assert result.code == 2, result
    assert result.err.startswith("librarian: error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err, result.err


def sm80_sm90_so() -> bytes:
    """A host .so whose fatbin has sm_80 and sm_90 cubins (by CUDA 13.0), built with struct."""
    blob = fatbin_blob(
        fatbin_entry(2, 80, cubin_bytes(80, release="13.0")),
        fatbin_entry(2, 90, cubin_bytes(90, release="13.0")),
    )
    return so_with_fatbin(blob)


def test_a_multi_arch_wheel_goes_in_every_cell_it_serves(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path]
) -> None:
    whl = wheel(tmp_path / "dist", "multik", {"multik/_C.so": cuda_sos["multi"].read_bytes()})
    result = run("publish", str(whl), *LABEL)
    assert result.code == 0, result.err
    paths = [stored("multik", sm) for sm in ("75", "80", "86", "89")]
    assert [line.split()[-1] for line in result.out.splitlines()[:-1]] == paths
    assert result.out.splitlines()[-1] == "4 file(s) written to wheelhouse"
    house = tmp_path / "wheelhouse"
    inodes = {(house / p).stat().st_ino for p in paths}
    assert len(inodes) == 1 and (house / paths[0]).stat().st_nlink == 4  # one file, hard-linked
    shard = json.loads((house / "index/multik.json").read_text())
    assert sorted(e["path"] for e in shard["wheels"]) == sorted(paths)
    for entry in shard["wheels"]:
        facts = entry["facts"]
        assert facts["archs"] == ["sm_75", "sm_80", "sm_86", "sm_89", "compute_89"]
        assert facts["toolkit"] == "13.0"
        (member,) = facts["binaries"]
        assert member["path"] == "multik/_C.so" and "libcudart.so.13" in member["needed"]
    assert run("verify", "--deep").code == 0


def test_sm_that_the_binaries_do_not_serve_is_refused(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path]
) -> None:
    whl = wheel(tmp_path / "dist", "ampk", {"ampk/_C.so": cuda_sos["two_tu"].read_bytes()})  # sm_80 only
    refused = run("publish", str(whl), *LABEL, "--sm", "75")
    one_line_error(refused, whl.name, "have no code for sm75", "sm_80", "--trust-sm")
    assert not (tmp_path / "wheelhouse").exists() or not list((tmp_path / "wheelhouse").rglob("*.whl"))
    assert run("publish", str(whl), *LABEL, "--sm", "86").code == 0  # sm_80 SASS runs on 8.6
    forced = run("publish", str(whl), *LABEL, "--sm", "75", "--trust-sm")
    assert forced.code == 0, forced.err
    assert (tmp_path / "wheelhouse" / stored("ampk", "75")).is_file()
    assert run("verify").code == 0  # the shallow check reads no binaries: only --deep can tell
    # The entry remembers --trust-sm: verify --deep reports the finding as accepted, not as a problem.
    deep = run("verify", "--deep")
    assert deep.code == 0, deep.out
    accepted = f"{stored('ampk', '75')}: accepted at publish (--trust-sm): its binaries do not run on sm75 (they have sm_80)"
    assert accepted in deep.out.splitlines()
    assert stored("ampk", "86") not in deep.out and "1 accepted at publish" in deep.out


def test_a_wheel_is_filed_for_every_gpu_a_member_serves(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path]
) -> None:
    # _C.so: sm_75 sm_80 sm_86 sm_89; _k.so: sm_80 sm_90. Each member loads only where it is called (torchao's
    # pattern), so the wheel serves every GPU one of them has SASS for, partly where the other has none.
    members = {"twok/_C.so": cuda_sos["multi"].read_bytes(), "twok/_k.so": sm80_sm90_so()}
    whl = wheel(tmp_path / "dist", "twok", members)
    result = run("publish", str(whl), *LABEL)
    assert result.code == 0, result.err
    house = tmp_path / "wheelhouse"
    assert sorted(p.parent.parent.name for p in house.rglob("*.whl")) == [
        "sm75",
        "sm80",
        "sm86",
        "sm89",
        "sm90",
    ]
    refused = run("publish", str(whl), *LABEL, "--sm", "70")  # older than every SASS and the PTX
    one_line_error(refused, "have no code for sm70", "sm_75, sm_80, sm_86, sm_89, sm_90, compute_89")
    partly = run("doctor", str(house / stored("twok", "75")), "--sm", "75", "--json")
    gpu = json.loads(partly.out)["wheels"][0]["verdicts"][0]
    assert gpu["ok"] is True and gpu["partly"] == ["twok/_k.so"] and "runs, partly" in gpu["reason"]
    on_90 = run("doctor", str(house / stored("twok", "90")), "--sm", "90", "--driver", "13.0", "--json")
    gpu = json.loads(on_90.out)["wheels"][0]["verdicts"][0]  # _C.so's compute_89 PTX JITs on 9.0
    assert gpu["ok"] is True and gpu["partly"] == [] and "JIT-compiles compute_89" in gpu["reason"]
    assert run("verify", "--deep").code == 0


def test_verify_deep_reads_the_cell_from_the_path(
    run: Run, tmp_path: Path, cuda_sos: dict[str, Path]
) -> None:
    whl = wheel(tmp_path / "dist", "multik", {"multik/_C.so": cuda_sos["multi"].read_bytes()})
    assert run("publish", str(whl), *LABEL, "--sm", "89").code == 0
    house = tmp_path / "wheelhouse"
    moved = house / stored("multik", "70")
    moved.parent.mkdir(parents=True)
    shutil.move(house / stored("multik", "89"), moved)  # by hand: the index still says sm89
    deep = run("verify", "--deep")
    assert deep.code == 1
    lines = deep.out.splitlines()
    assert f"{stored('multik', '70')}: {NOT_INDEXED}" in lines
    assert (
        f"{stored('multik', '70')}: its binaries do not run on sm70 (they have sm_75, sm_80, sm_86, sm_89, compute_89)"
        in lines
    )


def test_a_label_that_contradicts_the_toolkit(run: Run, tmp_path: Path, cuda_sos: dict[str, Path]) -> None:
    whl = wheel(tmp_path / "dist", "multik", {"multik/_C.so": cuda_sos["multi"].read_bytes()})
    refused = run("publish", str(whl), "--cuda", "12.8", "--torch", "2.8")
    one_line_error(
        refused, whl.name, "label says CUDA 12.8, device code built by CUDA 13.0", "--allow-cuda-mismatch"
    )
    assert run("publish", str(whl), "--cuda", "12.8", "--torch", "2.8", "--allow-glibc-mismatch").code == 2
    forced = run("publish", str(whl), "--cuda", "12.8", "--torch", "2.8", "--allow-cuda-mismatch")
    assert forced.code == 0, forced.err
    assert run("verify").code == 0
    # The entry records --allow-cuda-mismatch: verify --deep accepts what it accepted (exit 0, a line each).
    deep = run("verify", "--deep", "--json")
    assert deep.code == 0, deep.out
    data = json.loads(deep.out)
    assert data["schema"] == 1 and data["ok"] is True and data["problems"] == []
    # The same bytes, hard-linked under four cells: read once, reported once.
    paths = [stored("multik", sm, "torch2.8-cu128", "cu128torch2.8") for sm in ("75", "80", "86", "89")]
    assert data["accepted"] == [
        {"path": paths[0], "flag": "--allow-cuda-mismatch", "finding": finding}
        for finding in (
            "label says CUDA 12.8, device code built by CUDA 13.0",
            "label says CUDA 12.8, multik/_C.so links libcudart.so.13",
        )
    ]
