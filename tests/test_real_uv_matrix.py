"""Opt-in (``-m network``): issue 43's matrix. Real uv 0.13.9 (no librarian in the client) installs from a
store made with ``--variants`` from real wheels (cupy-cuda13x filed under 8 cells, faiss-gpu-cu12,
bitsandbytes; one release with three builds of the sample kernel; an ``sm_90a``-only wheel), for 8 forced
GPUs and 3 drivers, beside what ``pull`` serves. Every disagreement must be one the README's table names:

- ``jit-across-majors``: pull serves PTX that the driver JITs for a GPU of a newer major; uv's NVIDIA
  provider reports ``N0_virtual`` only for the GPU's own major, so uv cannot choose that variant.

The wheels come from PyPI (``LIBRARIAN_REAL_WHEELS``: a folder that already holds them, else downloaded);
the table is printed (``-s`` shows it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import HERE_PYTHON, HERE_TAG
from tests.conftest import Run
from tests.cuda_fixtures import real_sos
from tests.gpu_wheels import isolate_machine, so_wheel
from tests.test_real_uv_variants import target, uv  # noqa: F401  # the uv fixture

pytestmark = pytest.mark.network

PY, TAGS = HERE_PYTHON, HERE_TAG
MACHINE = ("--python", PY, "--platform", "manylinux_2_28_x86_64")
GPUS = ("7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")  # x86_64 GPUs (12.1 is GB10, ARM)
DRIVERS = ("12.8", "13.0", "13.2")
REAL = {  # package as pip names it -> (publish's label flags)
    "cupy-cuda13x": ("--cuda", "13.0", "--torch", "2.9"),
    "faiss-gpu-cu12": ("--cuda", "12.8", "--torch", "2.9", "--allow-cuda-mismatch"),
    "bitsandbytes": ("--cuda", "12.8", "--torch", "2.9", "--allow-cuda-mismatch"),
}
NAMED = {"jit-across-majors"}  # the disagreements the README's table names


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")


@pytest.fixture(scope="module")
def real_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = Path(os.environ.get("LIBRARIAN_REAL_WHEELS") or tmp_path_factory.mktemp("real"))
    found = {}
    for package in REAL:
        stem = package.replace("-", "_")
        have = sorted(folder.glob(f"{stem}-*.whl"))
        if not have:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 "--python-version", PY, "--platform", "manylinux_2_28_x86_64", "--platform",
                 "manylinux_2_24_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform",
                 "manylinux2014_x86_64", package, "-d", str(folder)],
                check=True, timeout=900,
            )  # fmt: skip
            have = sorted(folder.glob(f"{stem}-*.whl"))
        found[package] = have[-1]
    return found


def _label_installed(python: Path, dist: str) -> str | None:
    """The variant label uv installed for ``dist`` (its ``variant.json``), ``""`` for a plain wheel, ``None``
    for nothing installed."""
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    infos = sorted(site.glob(f"{dist}-*.dist-info"))
    if not infos:
        return None
    doc = infos[0] / "variant.json"
    return next(iter(json.loads(doc.read_text())["variants"])) if doc.is_file() else ""


def _pulled_label(store: Path, pulled: dict[str, object]) -> str | None:
    (wheel,) = pulled["wheels"]  # type: ignore[misc]
    path = wheel["path"]
    if path is None:
        return None
    package = path.split("/", 1)[0]
    for entry in json.loads((store / "index" / f"{package}.json").read_text())["wheels"]:
        if entry["path"] == path:
            return entry.get("variant", {}).get("filename", "").removesuffix(".whl").rsplit("-", 1)[-1]
    raise AssertionError(f"pull served {path}, which the index does not hold")


def _why(store: Path, package: str, label: str | None, gpu: str) -> str:
    """Why uv and pull may differ here, by the properties of what pull served: ``jit-across-majors`` where
    the served build has no SASS for the GPU's major but PTX of an older major."""
    if label is None:
        return "unexplained"
    for doc in (store / "variants").glob("*-variants.json"):
        variants = json.loads(doc.read_text())["variants"]
        if label in variants:
            values = variants[label].get("nvidia", {}).get("sm_arch", [])
            major = int(gpu.split(".")[0])
            own = [v for v in values if int(v.split("_")[0]) // 10 == major]
            if not own and any(v.endswith("_virtual") for v in values):
                return "jit-across-majors"
    return "unexplained"


def test_uv_installs_what_pull_serves_for_8_gpus_and_3_drivers(
    run: Run,
    uv: Path,  # noqa: F811  # the fixture
    real_wheels: dict[str, Path],
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sos = real_sos(tmp_path_factory)
    samples = [
        so_wheel(tmp_path / f"k{a}", sos[a], version="1.0", tags=TAGS) for a in ("sm_80", "sm_86", "sm_90")
    ]
    only90a = so_wheel(tmp_path / "k90a", sos["sm_90a"], name="hopper", version="1.0", tags=TAGS)
    line = ("--cuda", "13.0", "--torch", "2.9")
    cells = (("--sm", "80"), ("--sm", "86", "--sm", "89"), ("--sm", "90"), ())  # three builds, one release
    inputs = [(w, (*line, *sms)) for w, sms in zip([*samples, only90a], cells, strict=True)]
    inputs += [(real_wheels[p], flags) for p, flags in REAL.items()]
    for store, extra in (("plain", ()), ("wheelhouse", ("--variants",))):
        for wheel, flags in inputs:
            done = run("publish", str(wheel), *flags, "--repo", store, *extra)
            assert done.code == 0, (wheel, done.err)
    plain, store = tmp_path / "plain", tmp_path / "wheelhouse"

    # The cost: the plain store's wheels plus one variant wheel per distinct build, no more.
    variants = sorted((store / "variant-wheels").rglob("*.whl"))
    wheels = sorted(p for p in store.rglob("*.whl") if "variant-wheels" not in p.parts)
    assert len(variants) == len(inputs)  # seven builds, filed under many more cells
    assert len(wheels) > len(inputs) + 8  # cupy alone is filed under 8 cells
    size = sum(p.stat().st_size for p in store.rglob("*.whl"))
    assert size == sum(p.stat().st_size for p in plain.rglob("*.whl")) + sum(
        p.stat().st_size for p in variants
    )

    packages = {"kern": "kern", "hopper": "hopper", "cupy-cuda13x": "cupy_cuda13x",
                "faiss-gpu-cu12": "faiss_gpu_cu12", "bitsandbytes": "bitsandbytes"}  # fmt: skip
    rows, unexplained = [], []
    for gpu in GPUS:
        for driver in DRIVERS:
            python = target(uv, tmp_path / f"t{gpu}-{driver}")
            env = {**os.environ, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": gpu,
                   "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": driver}  # fmt: skip
            for package, dist in packages.items():
                layout_name = dist if package != "cupy-cuda13x" else "cupy_cuda13x"
                links = store / "variants" / f"{layout_name}.html"
                subprocess.run(
                    [uv, "pip", "install", "--python", python, "--no-index", "--no-cache", "--no-deps",
                     "--reinstall", "--preview-features", "wheel-variants", package, "--find-links", links],
                    check=False, env=env, capture_output=True, text=True, timeout=300,
                )  # fmt: skip
                by_uv = _label_installed(python, dist)
                subprocess.run([uv, "pip", "uninstall", "-q", "--python", python, package], check=False,
                               capture_output=True)  # fmt: skip
                pulled = run("pull", package, "--sm", gpu.replace(".", ""), "--driver", driver, "--torch", "2.9",
                             *MACHINE, "--repo", "wheelhouse", "--json", "-o", f"p-{gpu}-{driver}-{dist}")  # fmt: skip
                by_pull = _pulled_label(store, json.loads(pulled.out)) if pulled.code == 0 else None
                verdict = "agree" if by_uv == by_pull else _why(store, package, by_pull, gpu)
                rows.append((gpu, driver, package, by_uv or "-", by_pull or "-", verdict))
                if verdict not in {"agree", *NAMED}:
                    unexplained.append(rows[-1])
    print("\n".join(f"{g:>5} {d:>5} {p:<15} uv={u:<22} pull={q:<22} {v}" for g, d, p, u, q, v in rows))
    assert not unexplained, unexplained
    cupy = [r for r in rows if r[2] == "cupy-cuda13x"]
    assert all(r[5] == "agree" for r in cupy), cupy  # item 2: the cupy case agrees
    assert any(r[3] != "-" for r in cupy)
