"""Real ``win_amd64`` CUDA wheels from PyPI read to the bytes (opt-in: ``pytest -m network``).

pefile (an independent PE reader) finds each DLL's fatbin section and its imports; librarian's facts must
agree: the archs the fatbin reader finds in that section, the DLLs imported, the torch binding.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pefile
import pytest

from librarian.wheel.fatbin import read_fatbin, scan_fatbins
from librarian.wheel.members import inspect_wheel
from tests.conftest import Run
from tests.test_real_wheels import _download

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("real-windows")
    return {
        "bitsandbytes": _download("bitsandbytes==0.50.2", "win_amd64", where / "bnb"),
        "xformers": _download("xformers==0.0.35", "win_amd64", where / "xformers"),
        "cupy": _download("cupy-cuda12x==14.2.0", "win_amd64", where / "cupy"),
        "onnxruntime": _download("onnxruntime-gpu", "win_amd64", where / "ort"),
        "cufft": _download("nvidia-cufft-cu12", "win_amd64", where / "cufft"),
        "curand": _download("nvidia-curand-cu12", "win_amd64", where / "curand"),
        "nvjpeg": _download("nvidia-nvjpeg-cu12", "win_amd64", where / "nvjpeg"),
    }


def oracle(data: bytes) -> tuple[set[str], tuple[str, ...], set[str]]:
    """Per pefile: the archs in the ``.nv_fatb`` and data sections (read by the fatbin reader), the imported DLLs
    and symbols."""
    pe = pefile.PE(data=data, fast_load=False)
    archs: set[str] = set()
    for s in pe.sections:
        size = min(s.Misc_VirtualSize or s.SizeOfRawData, s.SizeOfRawData)
        if s.Name.rstrip(b"\0") == b".nv_fatb":
            archs |= {str(e.arch) for e in read_fatbin(data, s.PointerToRawData, size, section=".nv_fatb")}
        elif s.Name.rstrip(b"\0") == b"__nv_rel":
            continue  # relocatable device code (-rdc): linked at build time, never loaded, not executable archs
        elif s.Characteristics & 0x40 and not s.Characteristics & 0x20000020 and size:  # data, not code
            archs |= {str(e.arch) for e in scan_fatbins(data, s.PointerToRawData, size, section="data")}
    # the import table and the delay-load one alike, as librarian reads them
    imports = [*getattr(pe, "DIRECTORY_ENTRY_IMPORT", []), *getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", [])]
    dlls = tuple(e.dll.decode() for e in imports)
    return archs, dlls, {i.name.decode() for e in imports for i in e.imports if i.name}


# The least number of DLLs in which the oracle finds device code, per wheel.
FATBIN_DLLS = {
    "bitsandbytes": 7,
    "xformers": 1,
    "cupy": 1,
    "onnxruntime": 1,
    "cufft": 1,
    "curand": 1,
    "nvjpeg": 1,
}


@pytest.mark.parametrize("name", sorted(FATBIN_DLLS))
def test_windows_members_agree_with_pefile(wheels: dict[str, Path], name: str) -> None:
    facts = {b.path: b for b in inspect_wheel(wheels[name]).binaries}
    checked = 0
    with zipfile.ZipFile(wheels[name]) as zf:
        for member in zf.namelist():
            if not member.endswith((".dll", ".pyd")):
                continue
            archs, dlls, _ = oracle(zf.read(member))
            b = facts[member]
            assert b.needed == dlls, member
            if archs:
                assert {str(a) for a in (*b.sass, *b.ptx)} == {a for a in archs if not a.startswith("lto")}, (
                    member
                )
                checked += 1
    assert checked >= FATBIN_DLLS[name]


def test_windows_cufft_keeps_its_fatbins_in_data(wheels: dict[str, Path]) -> None:
    facts = inspect_wheel(wheels["cufft"])
    cufft = next(b for b in facts.binaries if b.path.endswith(".dll") and "cufft64" in b.path)
    assert ".data" in cufft.embedded and len(cufft.sass) >= 5, (cufft.embedded, cufft.sass)


def test_windows_rows_and_verdicts(run: Run, wheels: dict[str, Path]) -> None:
    bnb = run("inspect", str(wheels["bitsandbytes"])).out
    assert "runs natively on" in bnb and "sm89" in bnb and "windows (pe)" in bnb
    xformers = run("inspect", str(wheels["xformers"])).out
    assert "stable ABI" in xformers and "torch_cpu.dll" in xformers and "cudart64_12.dll" in xformers
    with zipfile.ZipFile(wheels["xformers"]) as zf:
        _, _, imported = oracle(zf.read("xformers/_C.pyd"))
    assert not [
        s for s in imported if s.startswith("?") and "@c10@@" in s
    ]  # the oracle: no mangled c10 import
    flags = ("--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.12", "--driver", "12.8")
    assert run("doctor", str(wheels["bitsandbytes"]), *flags, "--platform", "win_amd64").code == 0
    wrong_os = run("doctor", str(wheels["bitsandbytes"]), *flags, "--platform", "manylinux_2_28_x86_64")
    assert wrong_os.code == 1 and "OS        FAIL" in wrong_os.out


OK, NO, UNKNOWN = True, False, None
DEMANDS = ("gpu", "torch", "cuda", "python", "cpu", "os", "glibc")


@pytest.mark.parametrize(
    ("wheel", "flags", "expected"),
    [
        # bitsandbytes on a Windows RTX 4090, torch 2.9 + CUDA 12.8: its CUDA 12.8 DLL loads, no torch linked
        ("bitsandbytes", ("--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.12", "--platform", "win_amd64",
                          "--driver", "12.8"), (OK, OK, OK, OK, OK, OK, OK)),
        # the same Windows wheel asked of a Linux machine: another OS and no tag that fits
        ("bitsandbytes", ("--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.12", "--platform",
                          "manylinux_2_35_x86_64", "--driver", "12.8"), (OK, OK, OK, NO, OK, NO, OK)),
        # xformers (stable ABI, floor 2.10 by its shim imports; its METADATA requires torch>=2.10) on a Windows
        # RTX 4090 with torch 2.9: the requirement rules it out (issue 45 item 6)
        ("xformers", ("--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.12", "--platform", "win_amd64",
                      "--driver", "12.8"), (OK, NO, OK, OK, OK, OK, OK)),
        # and on a GH200 (Arm Linux) by its preset: another CPU and OS, no tag
        ("xformers", ("--preset", "gh200", "--torch", "2.9", "--cuda", "12.8"), (OK, NO, OK, NO, NO, NO, OK)),
        # the CUDA 12 libraries and toolkits that link no torch, on a Windows RTX 4090 with torch 2.9 + CUDA 12.8
        *((name, ("--preset", "windows-rtx4090", "--torch", "2.9", "--cuda", "12.8", "--driver", "12.9"),
           (OK, OK, OK, OK, OK, OK, OK)) for name in ("cupy", "cufft", "curand", "nvjpeg")),
        # onnxruntime-gpu's current Windows wheel is a CUDA 13 build: it runs with a CUDA 13 torch and driver,
        # and not with a CUDA 12.8 one (its runtime needs a CUDA 13 driver)
        ("onnxruntime", ("--preset", "windows-rtx4090", "--torch", "2.9", "--cuda", "13.0", "--driver", "13.0"),
         (OK, OK, OK, OK, OK, OK, OK)),
        ("onnxruntime", ("--preset", "windows-rtx4090", "--torch", "2.9", "--cuda", "12.8", "--driver", "12.9"),
         (OK, OK, NO, OK, OK, OK, OK)),
    ],
)  # fmt: skip
def test_doctor_on_real_windows_wheels_matches_the_table(
    run: Run, wheels: dict[str, Path], wheel: str, flags: tuple[str, ...], expected: tuple[bool | None, ...]
) -> None:
    import json

    report = json.loads(run("doctor", str(wheels[wheel]), *flags, "--json").out)["wheels"][0]
    got = tuple(next(v["ok"] for v in report["verdicts"] if v["demand"] == d) for d in DEMANDS)
    assert got == expected, [(v["demand"], v["ok"], v["reason"]) for v in report["verdicts"]]
