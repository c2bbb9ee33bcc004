"""Real macOS arm64 wheels from PyPI read to the bytes (opt-in: ``pytest -m network``): torchvision and
torchaudio 2.9's extensions link libtorch's dylibs and import mangled ATen symbols (``__ZN2at...``): exact.
macholib, an independent Mach-O reader, is the oracle for the dylibs. macOS has no CUDA: no CUDA cell."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from macholib.mach_o import LC_LOAD_DYLIB
from macholib.MachO import MachO

from librarian.wheel.members import inspect_wheel
from tests.conftest import Run
from tests.test_real_wheels import _download

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("real-macos")
    return {
        "torchvision": _download("torchvision==0.24.0", "macosx_11_0_arm64", where / "tv"),
        "torchaudio": _download("torchaudio==2.9.0", "macosx_11_0_arm64", where / "ta"),
    }


@pytest.mark.parametrize("name", ["torchvision", "torchaudio"])
def test_macos_extensions_agree_with_macholib_and_bind_exactly(
    run: Run, wheels: dict[str, Path], name: str, tmp_path: Path
) -> None:
    facts = {b.path: b for b in inspect_wheel(wheels[name]).binaries}
    with zipfile.ZipFile(wheels[name]) as zf:
        member = {"torchvision": "torchvision/_C.so", "torchaudio": "torchaudio/lib/libtorchaudio.so"}[name]
        (tmp_path / "m.so").write_bytes(zf.read(member))
    oracle = [
        lc[2].split(b"\0")[0].decode()  # the install name whole (@rpath/libc10.dylib), as librarian keeps it
        for h in MachO(str(tmp_path / "m.so")).headers
        for lc in h.commands
        if lc[0].cmd == LC_LOAD_DYLIB
    ]
    assert facts[member].needed == tuple(dict.fromkeys(oracle))
    assert any(lib.endswith("/libtorch_cpu.dylib") for lib in facts[member].torch_libraries)
    assert facts[member].torch_symbols
    row = next(
        line for line in run("inspect", str(wheels[name])).out.splitlines() if line.startswith("  torch")
    )
    said = "imports at::" if shutil.which("c++filt") else "imports _ZN2at"  # demangled where it can be
    assert said in row and "libtorchaudio" not in row.split("links", 1)[-1], row
    report = json.loads(run("doctor", str(wheels[name]), "--preset", "mac", "--torch", "2.9", "--json").out)[
        "wheels"
    ][0]
    verdicts = {v["demand"]: v["ok"] for v in report["verdicts"]}
    assert (
        verdicts["os"] is True and verdicts["cpu"] is True and verdicts["gpu"] is True
    )  # no device code to run
    # among a farm's wheels a macOS one is skipped with a warning; --refuse-macos makes it the error it was
    skipped = run("publish", str(wheels[name]), "--torch", "2.9", "--cuda", "12.8", "--sm", "80")
    assert (
        skipped.code == 0
        and "a macOS wheel (macOS has no CUDA: no cell to file it in); skipped" in skipped.err
    )
    refused = run(
        "publish", str(wheels[name]), "--torch", "2.9", "--cuda", "12.8", "--sm", "80", "--refuse-macos"
    )
    assert refused.code == 2 and "macOS has no CUDA: it files no CUDA cell" in refused.err
