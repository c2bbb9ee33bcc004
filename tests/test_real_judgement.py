"""One judgement on real wheels from PyPI (README: inspect, doctor) (opt-in: ``pytest -m network``).

bitsandbytes 0.50.2 (one library per CUDA line, Intel XPU and ROCm libraries), cupy-cuda12x 14.2.0 and
sgl-kernel (WHEEL says ``linux_*`` where the filename says ``manylinux2014_*``; sgl-kernel's own extension
modules beside vendored mscclpp), nvidia-cufft-cu12 (libcufftw's stub cubin), xformers 0.0.35 (an
unlabelled wheel that links torch), torchao 0.18.0 (torch's stable ABI).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.test_real_wheels import _download

pytestmark = pytest.mark.network

ARM = ("--python", "3.12", "--platform", "manylinux_2_28_aarch64", "--driver", "12.9")
X86 = ("--python", "3.12", "--driver", "12.8")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("real-judgement")
    return {
        "bitsandbytes": _download("bitsandbytes==0.50.2", "manylinux_2_24_x86_64", where / "bnb"),
        "cupy": _download("cupy-cuda12x==14.2.0", "manylinux2014_x86_64", where / "cupy"),
        "sgl": _download("sgl-kernel==0.3.21", "manylinux2014_aarch64", where / "sgl"),
        "cufft": _download("nvidia-cufft-cu12==11.4.1.4", "manylinux2014_x86_64", where / "cufft"),
        "xformers": _download("xformers==0.0.35", "manylinux_2_28_x86_64", where / "xformers"),
        "torchao": _download("torchao==0.18.0", "manylinux_2_28_x86_64", where / "torchao"),
    }


def doctor(run: Run, wheel: Path, *flags: str) -> dict[str, object]:
    result = run("doctor", str(wheel), *flags, "--json")
    assert result.code in (0, 1), result.err
    return json.loads(result.out)["wheels"][0]  # type: ignore[no-any-return]


def verdict(report: dict[str, object], demand: str) -> dict[str, object]:
    return next(v for v in report["verdicts"] if v["demand"] == demand)  # type: ignore[attr-defined,no-any-return]


def test_bitsandbytes_one_answer(run: Run, wheels: dict[str, Path]) -> None:
    whl = wheels["bitsandbytes"]
    report = doctor(run, whl, "--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--glibc", "2.31", *X86)
    assert report["runs"] is True, report  # the XPU library's GLIBC_2.32 is not this machine's business
    never = {n["member"].rsplit("/", 1)[-1]: n["why"] for n in report["never_loaded"]}  # type: ignore[attr-defined]
    assert never["libbitsandbytes_xpu2025.so"] == "for Intel XPU GPUs"
    assert never["libbitsandbytes_rocm64.so"] == "for AMD ROCm GPUs"
    assert never["libbitsandbytes_cpu.so"] == "the CPU-only build of a CUDA library"
    assert never["libbitsandbytes_cuda132.so"] == "another CUDA line's build"
    published = run("publish", str(whl), "--torch", "2.9", "--cuda", "12.8")  # the 12.8 build is 12.8's
    assert published.code == 0, published.err
    assert run("verify", "--deep").code == 0
    # An x86_64 machine with a Jetson Orin GPU does not exist: refused, not served "by compatible sm_86 SASS"
    pulled = run("pull", "bitsandbytes", "--sm", "87", "--torch", "2.9", "--cuda", "12.8", *X86, "-o", "out")
    assert pulled.code == 2 and "no such machine: Jetson AGX Orin" in pulled.err, pulled


def test_a_wheel_file_that_disagrees_with_its_filename_is_reported_and_repaired(
    run: Run, wheels: dict[str, Path]
) -> None:
    whl = wheels["cupy"]
    seen = run("inspect", str(whl))
    assert "! WHEEL Tag: cp312-cp312-linux_x86_64, filename says cp312-cp312-manylinux2014_x86_64" in seen.out
    published = run("publish", str(whl), "--torch", "2.9", "--cuda", "12.8")
    assert published.code == 0, published.err
    assert "WHEEL's Tag lines disagree with its filename; publish writes the filename's" in published.err
    assert run("verify", "--deep").code == 0


@pytest.mark.parametrize(("sm", "runs"), [("90", True), ("100", True), ("103", False), ("121", False)])
def test_sgl_kernel_is_judged_by_its_own_extension_modules(
    run: Run, wheels: dict[str, Path], sm: str, runs: bool
) -> None:
    report = doctor(run, wheels["sgl"], "--sm", sm, "--torch", "2.9", "--cuda", "12.8", *ARM)
    gpu = verdict(report, "gpu")
    assert gpu["ok"] is runs, gpu  # on 10.3 and 12.1 only mscclpp's (vendored) PTX has code
    if not runs:
        assert "its own extension modules decide" in str(gpu["reason"])
    stub = next(n for n in report["loads"] if n.endswith("spatial_ops.abi3.so"))  # type: ignore[attr-defined]
    assert stub not in gpu["partly"]  # type: ignore[operator]  # cubins with no kernel: serves and blocks nothing


def test_libcufftw_s_stub_cubin_does_not_make_cufft_run_partly(run: Run, wheels: dict[str, Path]) -> None:
    report = doctor(run, wheels["cufft"], "--sm", "90", "--torch", "2.9", "--cuda", "12.8", *X86)
    assert report["runs"] is True and report["partly"] == [], report["partly"]
    assert report["native"] is True


def test_the_machine_s_torch_is_shown_for_an_unlabelled_wheel_that_links_torch(
    run: Run, wheels: dict[str, Path]
) -> None:
    torch = verdict(
        doctor(run, wheels["xformers"], "--sm", "89", "--torch", "2.9", "--cuda", "12.8", *X86), "torch"
    )
    # its METADATA requires torch>=2.10 (issue 45 item 6), as its shim imports say: ruled out, not unknown
    assert torch["ok"] is False and torch["machine_has"] == "torch 2.9"


# --- the torch and CUDA lines the bytes bind (README: pull) ----------------------------------------------------------


def torch_row(run: Run, wheel: Path) -> str:
    out = run("inspect", str(wheel)).out
    return next(line for line in out.splitlines() if line.startswith("  torch"))


def test_torchao_is_stable_abi_and_serves_later_torch_lines(run: Run, wheels: dict[str, Path]) -> None:
    # the import that sets its floor is named in between (issue 45 item 1)
    row = torch_row(run, wheels["torchao"])
    assert "(stable ABI); imports only its C shim" in row and "links libc10.so" in row
    # Labelled 2.9 it was once filed and served to 2.10, where a 2.11 shim import fails to load: a claim.
    refused = run("publish", str(wheels["torchao"]), "--torch", "2.9", "--cuda", "13.0")
    assert (
        refused.code == 2
        and "its bytes need torch >= 2.11: torch_dtype_float8_e8m0fnu since 2.11" in refused.err
    )
    published = run("publish", str(wheels["torchao"]), "--torch", "2.11", "--cuda", "13.0")
    assert published.code == 0, published.err
    machine = ("--sm", "90", "--cuda", "13.0", "--python", "3.12", "--driver", "13.0")
    for torch in ("2.11", "2.12"):
        pulled = run("pull", "torchao", "--torch", torch, *machine, "-o", "out")
        assert pulled.code == 0, pulled.err
        if torch != "2.11":
            assert "stable ABI, needs torch >= 2.11" in pulled.err, pulled.err
    older = run("pull", "torchao", "--torch", "2.10", *machine, "-o", "out")
    assert older.code == 1 and "torch_dtype_float8_e8m0fnu since 2.11" in older.err, older.err


def test_bitsandbytes_links_no_torch_and_serves_every_cuda_line_it_carries(
    run: Run, wheels: dict[str, Path]
) -> None:
    assert torch_row(run, wheels["bitsandbytes"]).endswith("does not link torch")
    assert run("publish", str(wheels["bitsandbytes"]), "--torch", "2.9", "--cuda", "12.8").code == 0
    for cuda in ("11.8", "12.1", "12.4", "12.6", "12.8", "13.0", "13.2"):
        pulled = run(
            "pull",
            "bitsandbytes",
            "--sm",
            "89",
            "--torch",
            "2.10",
            "--cuda",
            cuda,
            "--python",
            "3.12",
            "--driver",
            "13.2",
            "-o",
            "out",
        )
        assert pulled.code == 0, (cuda, pulled)
        assert "does not link torch" in pulled.err
        if cuda != "12.8":
            assert (
                f"carries a CUDA {cuda} build (libbitsandbytes_cuda{cuda.replace('.', '')}.so)" in pulled.err
            )


def undefined_symbols(wheel: Path, member: str) -> set[str]:
    """What a member imports, by pyelftools (an oracle independent of librarian's ELF reader)."""
    import io
    import zipfile

    from elftools.elf.elffile import ELFFile

    with zipfile.ZipFile(wheel) as zf:
        elf = ELFFile(io.BytesIO(zf.read(member)))
        dynsym = elf.get_section_by_name(".dynsym")
        return {s.name for s in dynsym.iter_symbols() if s["st_shndx"] == "SHN_UNDEF" and s.name}


def test_xformers_0_0_35_imports_only_torch_s_c_shim_so_it_is_stable_abi(
    run: Run, wheels: dict[str, Path]
) -> None:
    # The issue took xformers for an exact wheel; its Linux _C.so (0.0.35) imports aoti_torch_*/torch_* and
    # std:: symbols only: by the rule ("no mangled torch symbol") it is stable-ABI, as the oracle confirms.
    imported = undefined_symbols(wheels["xformers"], "xformers/_C.so")
    assert any(s.startswith("aoti_torch_") for s in imported)
    assert not [
        s for s in imported if s.startswith("_Z") and any(ns in s for ns in ("3c10", "2at", "5torch"))
    ]
    assert "(stable ABI); imports only its C shim" in torch_row(run, wheels["xformers"])


def test_torchvision_stays_exact(run: Run, tmp_path: Path) -> None:
    whl = _download("torchvision==0.24.0", "manylinux_2_28_x86_64", tmp_path / "tv")
    imported = undefined_symbols(whl, "torchvision/_C.so")
    binding = next(s for s in sorted(imported) if s.startswith(("_ZN3c10", "_ZN2at", "_ZN5torch")))
    row = torch_row(run, whl)
    said = "imports at::" if shutil.which("c++filt") else "imports _ZN"  # demangled where it can be
    assert said in row and "stable ABI" not in row and binding.startswith("_ZN"), row
    assert run("publish", str(whl), "--torch", "2.9", "--cuda", "12.8").code == 0
    refused = run("pull", "torchvision", "--sm", "89", "--torch", "2.10", "--cuda", "12.8", *X86, "-o", "out")
    assert refused.code == 1 and "another torch line: 2.9, not 2.10" in refused.err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # sgl-kernel (aarch64) on a GH200, every flag given: runs (its torch line unknown: no label)
        (("--sm", "90", "--torch", "2.9", "--cuda", "12.8", "--python", "3.12", "--platform", "manylinux_2_35_aarch64",
          "--driver", "12.9"), {"gpu": True, "torch": None, "cuda": True, "python": True, "cpu": True, "os": True,
                                "glibc": True}),
        # the same by preset
        (("--preset", "gh200", "--torch", "2.9", "--cuda", "12.8", "--driver", "12.9"),
         {"gpu": True, "torch": None, "cuda": True, "python": True, "cpu": True, "os": True, "glibc": True}),
        # on an x86_64 Linux box with an RTX 4090: another CPU and no tag that fits (its GPU code would run)
        (("--preset", "rtx4090-linux", "--torch", "2.9", "--cuda", "12.8", "--driver", "12.9"),
         {"gpu": True, "torch": None, "cuda": True, "python": False, "cpu": False, "os": True, "glibc": True}),
        # a Jetson Orin (sm_87, glibc 2.35): runs natively by its own sm_87 SASS
        (("--preset", "jetson-orin", "--torch", "2.9", "--cuda", "12.6", "--driver", "12.9", "--python", "3.12"),
         {"gpu": True, "torch": None, "cuda": True, "python": True, "cpu": True, "os": True, "glibc": True}),
    ],
)  # fmt: skip
def test_doctor_on_an_aarch64_wheel_matches_the_table(
    run: Run, wheels: dict[str, Path], flags: tuple[str, ...], expected: dict[str, bool | None]
) -> None:
    report = doctor(run, wheels["sgl"], *flags)
    got = {v["demand"]: v["ok"] for v in report["verdicts"]}  # type: ignore[attr-defined]
    assert got == expected, [(v["demand"], v["ok"], v["reason"]) for v in report["verdicts"]]  # type: ignore[attr-defined]


def test_cupy_cuda12x_links_cuda_12_libraries_and_no_runtime_so_a_cu130_torch_refuses_it(
    run: Run, wheels: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 52, item 2: cupy-cuda12x 14.2.0 NEEDs libnvrtc.so.12, libcublas.so.12 and friends and no
    libcudart (it loads the runtime itself): refused on a cu130 torch by doctor, publish and pull alike, and
    doctor --env names it installed; on a cu128 torch it runs."""
    import subprocess
    import sys

    whl = wheels["cupy"]
    cu13 = ("--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--python", "3.12", "--driver", "13.0")
    report = doctor(run, whl, *cu13)
    cuda = verdict(report, "cuda")
    assert report["runs"] is False and cuda["ok"] is False, cuda
    assert "which only CUDA 12 ships; torch's CUDA is 13" in str(cuda["reason"])
    assert str(cuda["predicted_error"]).endswith("cannot open shared object file: No such file or directory")
    cu12 = ("--sm", "89", "--torch", "2.9", "--cuda", "12.8", "--python", "3.12", "--driver", "13.0")
    assert doctor(run, whl, *cu12)["runs"] is True
    refused = run("publish", str(whl), "--torch", "2.9", "--cuda", "13.0")
    assert refused.code == 2 and "which only CUDA 12 ships" in refused.err, refused.err
    assert run("publish", str(whl), "--torch", "2.9", "--cuda", "12.8").code == 0
    pulled = run(
        "pull", "cupy-cuda12x", *cu13, "--platform", "manylinux2014_x86_64", "--compatible", "-o", "o"
    )
    assert pulled.code == 1 and not (tmp_path / "o").exists(), pulled.err
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")  # the wheel is cp312's: installed as pip lays it out
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--no-deps", "--target", str(site), "--python-version",
                    "3.12", "--platform", "manylinux2014_x86_64", "--only-binary=:all:", str(whl)],
                   check=True, timeout=600)  # fmt: skip
    env = run("doctor", "--env", "--python", str(venv / "bin" / "python"), *cu13[:6], "--driver", "13.0")
    assert env.code == 1 and "cupy_cuda12x 14.2.0: will NOT run (CUDA: links libcublas.so.12" in env.out, (
        env.out
    )
