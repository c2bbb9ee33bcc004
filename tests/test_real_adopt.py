"""Opt-in (``-m network``): issue 51's done-when with real CUDA wheels from PyPI. A wheelhouse made by hand in
the layout (unlabelled cupy-cuda13x, faiss-gpu-cu12, bitsandbytes and torchao wheels, three of them filed
where their bytes do not serve on purpose: CUDA 13 under cu128, no sm_90 code under sm90, a stable-ABI
build under a torch line below its floor) with a card of its own, as a folder and as a dataset on the
loopback Hub, is adopted in one command each; then pull, pip's find-links pages and uv's variants serve
the wheels at their old paths, verify --deep is clean, and the card's own text is intact.

The wheels come from PyPI (``LIBRARIAN_REAL_WHEELS``: a folder that already holds them, else downloaded).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.gpu_wheels import isolate_machine
from tests.loophub.server import LoopHub
from tests.test_real_uv_variants import target, uv  # noqa: F401  # the uv fixture

pytestmark = pytest.mark.network

WHEELS = {  # pip's name -> the filename prefix
    "cupy-cuda13x": "cupy_cuda13x-14.2.0-cp311",
    "faiss-gpu-cu12": "faiss_gpu_cu12-1.14.1.post1-cp311",
    "bitsandbytes": "bitsandbytes-0.50.2-py3",
    "torchao": "torchao-0.18.0-cp310",
}
CARD = "---\nlicense: apache-2.0\n---\n# Our lab's wheels\n\nBuilt by hand; link to the paths below.\n"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = Path(os.environ.get("LIBRARIAN_REAL_WHEELS") or tmp_path_factory.mktemp("real"))
    found = {}
    for package, prefix in WHEELS.items():
        have = sorted(folder.glob(f"{prefix}-*.whl"))
        if not have:
            version = prefix.split("-")[1]
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--platform",
                 "manylinux_2_24_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform",
                 "manylinux2014_x86_64", f"{package}=={version}", "-d", str(folder)],
                check=True, timeout=900,
            )  # fmt: skip
            have = sorted(folder.glob(f"{prefix}-*.whl"))
        found[package] = have[-1]
    return found


def layout(real: dict[str, Path]) -> dict[str, Path]:
    """Store path -> the wheel placed there by hand."""
    cupy, faiss, bnb, ao = (real[p] for p in WHEELS)
    return {
        f"cupy_cuda13x/sm89/torch2.9-cu130/{cupy.name}": cupy,  # where it serves
        f"cupy_cuda13x/sm90/torch2.9-cu128/{cupy.name}": cupy,  # CUDA 13 bytes under cu128
        f"faiss_gpu_cu12/sm75/torch2.9-cu128/{faiss.name}": faiss,  # sm_70 SASS runs on sm75
        f"faiss_gpu_cu12/sm90/torch2.9-cu128/{faiss.name}": faiss,  # no code for sm90
        f"bitsandbytes/sm89/torch2.9-cu128/{bnb.name}": bnb,  # its cu128 build loads
        f"torchao/sm90/torch2.10-cu130/{ao.name}": ao,  # stable ABI, floor 2.11
    }


MISFILED = (
    "cupy_cuda13x/sm90/torch2.9-cu128",
    "faiss_gpu_cu12/sm90/torch2.9-cu128",
    "torchao/sm90/torch2.10",
)


def check_adoption(done_out: str, placed: dict[str, Path]) -> None:
    for path in placed:
        misfiled = path.startswith(MISFILED)
        assert (f"refiled  {path} -> " if misfiled else f"adopted  {path}") in done_out, done_out
    assert "under torch2.9-cu130" in done_out and "under torch2.11-cu130" in done_out


def test_a_hand_made_folder_of_real_wheels_is_adopted_and_served_at_its_old_paths(
    run: Run,
    real: dict[str, Path],
    tmp_path: Path,
    uv: Path,  # noqa: F811  # the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")
    hand = tmp_path / "hand"
    placed = layout(real)
    for path, wheel in placed.items():
        (hand / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheel, hand / path)
    (hand / "README.md").write_text(CARD)
    listed = run("ls", "--repo", "hand")
    assert "6 wheel file(s) there" in listed.out
    done = run("reindex", "--adopt", "--refile", "--repo", "hand")
    assert done.code == 0, done.out + done.err
    check_adoption(done.out, placed)
    assert run("verify", "--deep", "--repo", "hand").code == 0
    assert (hand / "README.md").read_text() == CARD
    cupy = next(p for p in placed if p.startswith("cupy_cuda13x/sm89"))
    got = run("pull", "cupy-cuda13x", "--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--python", "3.11",
              "--platform", "manylinux_2_28_x86_64", "--repo", "hand", "-o", "out")  # fmt: skip
    assert got.code == 0 and got.out.startswith(f"{cupy} -> "), got.err
    # pip's find-links page names the old path, and pip installs from it
    page = (hand / "pages/sm89-torch2.9-cu130.html").read_text()
    assert f'href="../{cupy}#sha256=' in page
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--find-links",
         str(hand / "pages/sm89-torch2.9-cu130.html"), "cupy-cuda13x", "--target", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    assert (tmp_path / "site/cupy_cuda13x-14.2.0.dist-info").is_dir()
    # uv's variants: made for the adopted builds, and uv picks cupy's for a forced RTX 4090 on a 13.0 driver
    assert run("reindex", "--variants", "--repo", "hand").code == 0
    python = target(uv, tmp_path / "venv")
    env = {
        **os.environ,
        "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "8.9",
        "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0",
    }
    installed = subprocess.run(
        [uv, "pip", "install", "--python", python, "--no-index", "--no-cache", "--no-deps", "--preview-features",
         "wheel-variants", "cupy-cuda13x", "--find-links", hand / "variants" / "cupy_cuda13x.html"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    site = next((tmp_path / "venv").glob("lib/python*/site-packages"))
    assert (site / "cupy_cuda13x-14.2.0.dist-info" / "variant.json").is_file()
    assert run("verify", "--deep", "--repo", "hand").code == 0


def test_a_hand_made_hub_dataset_of_real_wheels_is_adopted_in_one_commit(
    run: Run, real: dict[str, Path], make_loophub: Callable[..., LoopHub]
) -> None:
    from huggingface_hub import CommitOperationAdd, HfApi

    hub = make_loophub()
    api = HfApi()
    api.create_repo("lab/wheels", repo_type="dataset")
    placed = layout(real)
    ops = [CommitOperationAdd(path, str(wheel)) for path, wheel in placed.items()]
    ops.append(CommitOperationAdd("README.md", CARD.encode()))
    api.create_commit("lab/wheels", ops, commit_message="our wheels", repo_type="dataset")
    before = hub.commits_made("lab/wheels")
    repo = "hf://datasets/lab/wheels"
    done = run("reindex", "--adopt", "--refile", "--repo", repo)
    assert done.code == 0, done.out + done.err
    check_adoption(done.out, placed)
    assert hub.commits_made("lab/wheels") == before + 1
    card = hub.files("lab/wheels")["README.md"].decode()
    assert "# Our lab's wheels\n\nBuilt by hand; link to the paths below.\n" in card
    assert "license: apache-2.0" in card and "<!-- librarian:begin -->" in card
    assert run("verify", "--deep", "--repo", repo).code == 0
    got = run("pull", "faiss-gpu-cu12", "--sm", "75", "--torch", "2.9", "--cuda", "12.8", "--python", "3.11",
              "--platform", "manylinux_2_28_x86_64", "--repo", repo, "-o", "out")  # fmt: skip
    assert got.code == 0 and got.out.startswith("faiss_gpu_cu12/sm75/torch2.9-cu128/"), got.err
