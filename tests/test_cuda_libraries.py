"""Every CUDA toolkit library binds the CUDA major, as libcudart does (issue 52, item 2): an extension that
NEEDs ``libnvrtc.so.12`` (and no CUDA runtime: nvcc's static one) runs on no CUDA 13 torch, and doctor,
publish's label check, pull and ``doctor --env`` say so alike; a file two majors ship
(``libcusparse.so.12``: CUDA 12 and 13) binds to both. The table is ``librarian/data/cuda_libraries.toml``.
The extensions are hand-built ELF files (sm_89 SASS by CUDA 12.8 or 13.0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from librarian.cuda_libraries import cuda_majors_of, parse_libraries
from librarian.errors import BadInput
from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import SHT_PROGBITS, cubin_bytes, elf_bytes, fatbin_blob, fatbin_entry

HERE = ("--sm", "89", "--python", "3.12", "--platform", "linux_x86_64")
TAGS = "cp312-cp312-linux_x86_64"


def kernel(name: str, tmp_path: Path, needed: tuple[str, ...], release: str = "12.8") -> Path:
    """``name`` 1.0: one sm_89 extension built by CUDA ``release`` that NEEDs ``needed`` (no libcudart)."""
    blob = fatbin_blob(fatbin_entry(2, 89, cubin_bytes(89, release=release)))
    so = elf_bytes(needed=needed, symbols={"PyInit__C": True}, sections=((".nv_fatbin", SHT_PROGBITS, blob),),
                   flags={".nv_fatbin": 0x2})  # fmt: skip
    return make_wheel(tmp_path / name, name, "1.0", TAGS, {f"{name}/__init__.py": b"", f"{name}/_C.so": so})


def test_the_table_names_each_file_with_the_majors_that_ship_it() -> None:
    assert cuda_majors_of("libnvrtc.so.12") == {12} and cuda_majors_of("/usr/lib/libnvrtc.so.13") == {13}
    assert cuda_majors_of("libcufft.so.11") == {12} and cuda_majors_of("cufft64_12.dll") == {13}
    assert cuda_majors_of("libcusparse.so.12") == {12, 13} and cuda_majors_of("NVRTC64_120_0.DLL") == {12}
    assert cuda_majors_of("libcurand.so.10") is None and cuda_majors_of("libcudnn.so.9") is None
    with pytest.raises(BadInput, match="mine.toml: not a CUDA library table"):
        parse_libraries('[libraries]\n"libx.so.1" = []\n', "mine.toml")


def test_a_cuda_12_library_is_refused_on_a_cuda_13_torch_by_doctor_publish_and_pull(
    run: Run, tmp_path: Path
) -> None:
    nvrtc = kernel("jitkern", tmp_path, ("libnvrtc.so.12", "libstdc++.so.6"))
    doctor = run("doctor", str(nvrtc), *HERE, "--torch", "2.9", "--cuda", "13.0", "--driver", "13.0")
    assert doctor.code == 1, doctor.out
    assert "links libnvrtc.so.12, which only CUDA 12 ships; torch's CUDA is 13" in doctor.out
    assert "libnvrtc.so.12: cannot open shared object file" in doctor.out
    assert run("doctor", str(nvrtc), *HERE, "--torch", "2.9", "--cuda", "12.8", "--driver", "13.0").code == 0

    labelled = run("publish", str(nvrtc), "--torch", "2.9", "--cuda", "13.0", "--sm", "89")
    assert labelled.code == 2 and "Traceback" not in labelled.err
    assert "says CUDA 13.0, jitkern/_C.so links libnvrtc.so.12, which only CUDA 12 ships" in labelled.err

    assert run("publish", str(nvrtc), "--torch", "2.9", "--cuda", "12.8", "--sm", "89").code == 0
    assert run("pull", "jitkern", "--torch", "2.9", "--cuda", "12.8", *HERE, "-o", "ok").code == 0
    refused = run("pull", "jitkern", "--torch", "2.9", "--cuda", "13.0", "--compatible", *HERE, "-o", "no")
    assert refused.code == 1 and not (tmp_path / "no").exists(), refused.err


def test_a_file_two_majors_ship_binds_to_both(run: Run, tmp_path: Path) -> None:
    sparse = kernel("sparsekern", tmp_path, ("libcusparse.so.12",), release="13.0")
    for cuda in ("12.8", "13.0"):
        got = run("doctor", str(sparse), *HERE, "--torch", "2.9", "--cuda", cuda, "--driver", "13.0")
        assert got.code == 0, (cuda, got.out)
    old = kernel("oldsolver", tmp_path, ("libcusolver.so.11",))  # CUDA 11 and 12 ship it; 13 does not
    assert run("doctor", str(old), *HERE, "--torch", "2.9", "--cuda", "13.0", "--driver", "13.0").code == 1


def test_doctor_env_names_an_installed_package_that_links_another_majors_library(tmp_path: Path) -> None:
    from tests.test_doctor_env import install

    where = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    (site,) = where.glob("lib/python*/site-packages")
    with __import__("zipfile").ZipFile(kernel("jitkern", tmp_path, ("libnvrtc.so.12",))) as z:
        install(site, "jitkern", {"jitkern/_C.so": z.read("jitkern/_C.so")})
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-m", "librarian", "doctor", "--env", "--python", str(where / "bin" / "python"),
            "--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--driver", "13.0", "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    (dist,) = json.loads(done.stdout)["distributions"]
    assert dist["name"] == "jitkern" and dist["runs"] is False
    cuda = next(v for v in dist["judgement"]["verdicts"] if v["demand"] == "cuda")
    assert "libnvrtc.so.12, which only CUDA 12 ships" in cuda["reason"], cuda
    assert cuda["predicted_error"].startswith("libnvrtc.so.12: cannot open shared object file")
