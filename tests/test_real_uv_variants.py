"""Opt-in (``-m network``): real uv 0.13.9 from PyPI picks a store's wheel variants, with no librarian on
the client; librarian's ``pull`` agrees; pip against the same store's pages behaves as before.

uv runs in a venv of its own and installs into a target venv that has no librarian. ``NV_VARIANT_PROVIDER_
FORCE_SM_ARCH`` and ``NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION`` stand in for a GPU and its driver (uv's
vendored NVIDIA provider reads them). uv 0.13.9 has no provider for ``abi_dependency`` (it skips the
declaration), so it installs no torch-bound variant at all: that is checked here as what it is, and the torch
properties are checked with variantlib 0.2.2's resolver, the drafts' reference implementation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.builders import HERE_PYTHON, HERE_TAG, make_wheel, stand_in_torch, torch_extension_so
from tests.conftest import Run
from tests.cuda_fixtures import elf_bytes, real_sos
from tests.gpu_wheels import isolate_machine, so_wheel
from tests.loophub.server import LoopHub

pytestmark = pytest.mark.network

UV = "uv==0.13.9"
VARIANTLIB = "variantlib==0.2.2"
PY, TAGS = HERE_PYTHON, HERE_TAG
MACHINE = ("--python", PY, "--platform", "linux_x86_64")


@pytest.fixture(scope="module")
def uv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv 0.13.9 from PyPI, in a venv of its own (the machine's pip configuration as it is)."""
    venv = tmp_path_factory.mktemp("uv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", UV], check=True, timeout=600)
    return venv / "bin" / "uv"


def target(uv: Path, where: Path, torch: str | None = None) -> Path:
    """A fresh venv with no librarian (and a stand-in torch of version ``torch``, where given)."""
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(where)], check=True)
    if torch is not None:
        wheel = next(stand_in_torch(where.parent / f"torch-{torch}", torch).glob("*.whl"))
        subprocess.run(
            [uv, "pip", "install", "-q", "--python", where / "bin" / "python", "--no-deps", wheel], check=True
        )
    return where / "bin" / "python"


def uv_install(
    uv: Path, python: Path, package: str, links: Path, sm: str, driver: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm,
        "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": driver,
    }
    command = [uv, "pip", "install", "--python", python, "--no-index", "--no-cache",
               "--preview-features", "wheel-variants", package, "--find-links", links]  # fmt: skip
    return subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=300)


def installed(python: Path, member: str) -> bytes | None:
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    path = site / member
    return path.read_bytes() if path.is_file() else None


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")


def test_uv_picks_the_build_for_the_gpu_and_pull_agrees(
    run: Run, uv: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sos = real_sos(tmp_path_factory)
    builds = {"86": sos["sm_86"].read_bytes(), "90": sos["sm_90"].read_bytes()}
    for sm, data in builds.items():
        wheel = so_wheel(tmp_path / f"b{sm}", data, version="1.0", tags=TAGS)
        assert run("publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--variants").code == 0
    store = tmp_path / "wheelhouse"
    links = store / "variants" / "kern.html"
    cases = {("8.9", "13.0"): builds["86"], ("9.0", "13.0"): builds["90"], ("7.5", "13.0"): None,
             ("8.9", "12.0"): None}  # fmt: skip  # a driver older than the code's CUDA: nothing
    for (capability, driver), expected in cases.items():
        python = target(uv, tmp_path / f"t{capability}-{driver}")
        result = uv_install(uv, python, "kern", links, capability, driver)
        got = installed(python, "kern/_C.so")
        assert got == expected, (capability, driver, result.stdout, result.stderr)
        if expected is None:
            assert result.returncode != 0 and "unsupported wheel variants" in result.stderr, result.stderr
        sm = capability.replace(".", "")
        pulled = run("pull", "kern", "--sm", sm, "--torch", "2.9", "--driver", driver, *MACHINE,
                     "-o", f"p{sm}-{driver}")  # fmt: skip
        if expected is None:
            assert pulled.code != 0, pulled.err
            continue
        assert pulled.code == 0, pulled.err
        (wheel,) = (tmp_path / f"p{sm}-{driver}").glob("*.whl")
        with zipfile.ZipFile(wheel) as zf:
            assert zf.read("kern/_C.so") == expected  # librarian's pull serves the very bytes uv chose

    # pip against the same store's pages: the label wheel, as before (pip has no variant support)
    venv = tmp_path / "pipvenv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    simple = (store / "pages" / "sm89-torch2.9-cu130" / "simple").as_uri()
    subprocess.run(
        [venv / "bin" / "pip", "install", "-q", "--no-deps", "--index-url", simple, "kern"], check=True
    )
    listed = subprocess.run(
        [venv / "bin" / "pip", "list", "--format", "json"], capture_output=True, text=True, check=True
    )
    assert {"name": "kern", "version": "1.0+cu130torch2.9"} in json.loads(listed.stdout)
    assert installed(venv / "bin" / "python", "kern/_C.so") == builds["86"]


@pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="builds sm_120a code with nvcc, which is not on PATH"
)
def test_an_x86_64_sm_120a_build_is_installed_by_uv_for_a_12_0_gpu(
    run: Run, uv: Path, tmp_path: Path
) -> None:
    """Issue 52, item 3: 120_real reaches sm121 too, but sm121 (DGX Spark) ships only with an Arm CPU, so an
    x86_64 wheel of sm_120a code says 120_real; uv installs it for a forced 12.0 GPU, as pull serves it."""
    src = tmp_path / "k.cu"
    src.write_text("__global__ void add(float* x) { x[threadIdx.x] += 1.0f; }\n"
                   'extern "C" void launch(float* x) { add<<<1, 32>>>(x); }\n')  # fmt: skip
    so = tmp_path / "k120a.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_120a,code=sm_120a",
                    "-o", str(so), str(src)], check=True, timeout=600)  # fmt: skip
    wheel = so_wheel(tmp_path / "a", so.read_bytes(), version="1.0", tags=TAGS)
    done = run("publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--variants")
    assert done.code == 0, done.err
    links = tmp_path / "wheelhouse" / "variants" / "kern.html"
    python = target(uv, tmp_path / "t120")
    result = uv_install(uv, python, "kern", links, "12.0", "13.0")
    assert installed(python, "kern/_C.so") == so.read_bytes(), (result.stdout, result.stderr)
    pulled = run("pull", "kern", "--sm", "120", "--torch", "2.9", "--driver", "13.0", *MACHINE, "-o", "p")
    assert pulled.code == 0, pulled.err


def test_ptx_of_an_older_generation_is_installed_by_uv_on_the_later_ones(
    run: Run, uv: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 52, item 7: compute_80 PTX alone runs by JIT on sm80 to sm120; the variant says 80_virtual and
    each later generation's N0_virtual (what each GPU's provider reports), so uv installs it on a forced
    9.0 and 12.0 GPU as well as 8.6; never with a driver older than the toolkit that wrote the PTX."""
    ptx = real_sos(tmp_path_factory)["ptx"].read_bytes()  # compute_80 from nvcc 13.0
    wheel = so_wheel(tmp_path / "a", ptx, version="1.0", tags=TAGS)
    done = run(
        "publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--sm", "80", "--trust-sm", "--variants"
    )
    assert done.code == 0, done.err
    links = tmp_path / "wheelhouse" / "variants" / "kern.html"
    for capability, driver, expected in (("8.6", "13.0", ptx), ("9.0", "13.0", ptx), ("12.0", "13.0", ptx),
                                         ("9.0", "12.8", None)):  # fmt: skip
        python = target(uv, tmp_path / f"t{capability}-{driver}")
        result = uv_install(uv, python, "kern", links, capability, driver)
        assert installed(python, "kern/_C.so") == expected, (capability, driver, result.stdout, result.stderr)


def test_torch_variants_uv_refuses_them_and_the_reference_resolver_picks_by_torch_line(
    run: Run, uv: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sm86 = real_sos(tmp_path_factory)["sm_86"].read_bytes()
    exact = {}
    for line in ("2.9", "2.10"):
        ext = torch_extension_so(line.encode())
        exact[line] = ext
        files = {"tkern/__init__.py": b"", "tkern/_C.so": ext, "tkern/_k.so": sm86}
        wheel = make_wheel(tmp_path / f"t{line}", "tkern", "2.0", TAGS, files)
        assert run("publish", str(wheel), "--torch", line, "--cuda", "13.0", "--variants").code == 0
    stable = elf_bytes(needed=("libtorch.so",), symbols={"aoti_torch_empty_strided": False})
    files = {"skern/__init__.py": b"", "skern/_C.so": stable, "skern/_k.so": sm86}
    wheel = make_wheel(tmp_path / "s", "skern", "3.0", TAGS, files)
    assert run("publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--variants").code == 0
    store = tmp_path / "wheelhouse"

    for torch in ("2.9.1", "2.10.0"):
        python = target(uv, tmp_path / f"uv-{torch}", torch)
        for package in ("tkern", "skern"):
            result = uv_install(uv, python, package, store / "variants" / f"{package}.html", "8.9", "13.0")
            # uv 0.13.9: "Skipping unsupported wheel variant provider `abi_dependency`": never the wrong torch
            assert result.returncode != 0 and "only unsupported wheel variants" in result.stderr, (
                result.stderr
            )

        # The drafts' reference resolver, in the same target (it reads the installed torch itself)
        subprocess.run([uv, "pip", "install", "-q", "--python", python, VARIANTLIB], check=True, timeout=600)
        picked = {}
        for package, version in (("tkern", "2.0"), ("skern", "3.0")):
            doc = store / "variants" / f"{package}-{version}-variants.json"
            out = subprocess.run(
                [python, "-c", RESOLVE, str(doc), "8.9"], capture_output=True, text=True, check=True
            )
            picked[package] = out.stdout.strip().splitlines()
        line = ".".join(torch.split(".")[:2])
        tdoc = json.loads((store / "variants" / "tkern-2.0-variants.json").read_text())
        # Labels name builds, not torch lines: each picked build is the one whose properties say this line.
        assert picked["tkern"] and all(
            tdoc["variants"][label]["abi_dependency"]["torch"] == [line] for label in picked["tkern"]
        ), picked
        assert picked["skern"], picked  # a stable-ABI build serves both lines


# The reference resolver over one variants.json: the NVIDIA values uv's provider reports for the GPU (the
# rule tests/test_variants.py states), abi_dependency from the installed packages, as variantlib does.
RESOLVE = """
import json, sys
from variantlib.models.variant import VariantDescription, VariantProperty
from variantlib.resolver.lib import sort_and_filter_supported_variants
doc = json.load(open(sys.argv[1])); major, minor = (int(x) for x in sys.argv[2].split("."))
supported = [VariantProperty("nvidia", "sm_arch", f"{major}{m}_real") for m in range(minor + 1)]
supported.append(VariantProperty("nvidia", "sm_arch", f"{major}0_virtual"))
supported += [VariantProperty("nvidia", "cuda_version_lower_bound", f"{a}.{b}") for a in (12, 13) for b in range(10)]
descs = [VariantDescription([VariantProperty(ns, f, v) for ns, fs in props.items() for f, vs in fs.items() for v in vs], label=label)
         for label, props in doc["variants"].items()]
for d in sort_and_filter_supported_variants(descs, supported, list(doc["default-priorities"]["namespace"][:1])):
    if d.properties:
        print(d.label)
"""


def test_uv_reads_the_variants_page_from_the_hub_over_http(
    run: Run, uv: Path, loophub: LoopHub, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The page's links are relative: under the Hub's resolve/ URLs they name the wheels and the json there.
    sos = real_sos(tmp_path_factory)
    wheel = so_wheel(tmp_path / "b", sos["sm_86"].read_bytes(), version="1.0", tags=TAGS)
    repo = ("--repo", "hf://datasets/team/wheels")
    assert (
        run("publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--variants", "--create", *repo).code
        == 0
    )
    page = f"{loophub.url}/datasets/team/wheels/resolve/main/variants/kern.html"
    python = target(uv, tmp_path / "t")
    result = uv_install(uv, python, "kern", page, "8.9", "13.0")
    assert result.returncode == 0, result.stderr
    assert installed(python, "kern/_C.so") == sos["sm_86"].read_bytes()
