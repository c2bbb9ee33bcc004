"""Opt-in (``-m network``): issue 44's environment, as a new user has it. A venv with PyPI's torch 2.14.1 (the
CUDA 13.0 build; ``LIBRARIAN_TORCH_VENV``: an existing venv that has it, else installed here), on which a
second venv is layered (a ``.pth``) holding PyPI's xformers, bitsandbytes and cupy-cuda13x and two small
extensions: one with sm_80 code only, one bound to another torch line (it imports a c10 symbol of the old
C++ ABI, which torch 2.14.1 does not export). ``doctor --env --sm 90 --driver 13.0`` must name exactly
the packages that will not run on an H100-class machine, and ``pull --fix --sm 90`` from a store holding the
right builds must replace them, the second judgement clean for them.

In the first test the extensions are hand-made ELF (the nvcc fixtures' sm_80 and sm_90 code); in the second
they are made by ``librarian build`` from tests/data/torchkern, as the issue's done-when asks (four compiles:
``LIBRARIAN_REAL_BUILD_CACHE`` keeps the build environments between runs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import HERE_PYTHON, HERE_TAG, make_wheel, torch_extension_so
from tests.conftest import Run
from tests.cuda_fixtures import elf_bytes, real_sos

pytestmark = pytest.mark.network

TAGS = HERE_TAG  # installed into a venv made from this interpreter
TORCHKERN = Path(__file__).resolve().parent / "data" / "torchkern"
PYTHON = HERE_PYTHON
PYPI = ("xformers", "bitsandbytes", "cupy-cuda13x")
OURS = {
    "kern80",
    "oldline",
    "xformers",
    "bitsandbytes",
    "cupy_cuda13x",
    "torch",
}  # what a given venv may add to


@pytest.fixture(scope="module")
def torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("LIBRARIAN_TORCH_VENV")
    venv = Path(given) if given else tmp_path_factory.mktemp("torch") / "venv"
    if not given:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([venv / "bin" / "pip", "install", "-q", "torch==2.14.1"], check=True, timeout=3600)
    (site,) = venv.glob("lib/python*/site-packages")
    if not (site / "torch" / "lib" / "libc10.so").is_file():
        pytest.skip(f"{venv}: no torch with libc10.so")
    return site


def layered_env(venv: Path, torch_site: Path, wheels: list[Path]) -> str:
    """A venv layered on the torch venv (a ``.pth``) holding PyPI's packages and ``wheels``: its python."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "torchvenv.pth").write_text(f"{torch_site}\n")
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-deps"]
    subprocess.run([*pip, *PYPI, *map(str, wheels)], check=True, timeout=1800)
    return python


def _exported_c10_symbol(site: Path) -> str:
    from librarian.wheel import dynamic_symbols

    with (site / "torch" / "lib" / "libc10.so").open("rb") as f:
        exports = dynamic_symbols(f)[0]
    return min(s for s in exports if s.startswith("_ZN3c1019UndefinedTensorImpl"))


def test_doctor_env_names_what_will_not_run_and_pull_fix_replaces_it(
    run: Run, torch_site: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sos = real_sos(tmp_path_factory)
    kern80 = make_wheel(tmp_path / "k80", "kern80", "1.0", TAGS, {"kern80/_C.so": sos["sm_80"].read_bytes()})
    oldline = make_wheel(tmp_path / "old", "oldline", "1.0", TAGS, {"oldline/_C.so": torch_extension_so()})
    python = layered_env(tmp_path / "env", torch_site, [kern80, oldline])

    machine = ("--python", python, "--sm", "90", "--driver", "13.0")
    judged = run("doctor", "--env", *machine)
    print(judged.out)
    assert judged.code == 1
    failing = {line.split()[0] for line in judged.out.splitlines() if ": will NOT run" in line} & OURS
    assert failing == {"kern80", "oldline", "xformers"}, judged.out  # xformers 0.0.35: a CUDA 12 build
    lines = judged.out.splitlines()
    assert any(line.startswith("  kern80 1.0: will NOT run (GPU arch:") for line in lines)
    assert any(line.startswith("  oldline 1.0: will NOT run (torch:") for line in lines)
    assert any("xformers" in line and "libcudart.so.12" in line for line in lines)
    for ok in ("torch 2.14.1: runs", "bitsandbytes", "cupy_cuda13x"):
        assert any(line.startswith(f"  {ok}") and "NOT" not in line for line in lines), ok
    on80 = run("doctor", "--env", "--python", python, "--sm", "80", "--driver", "13.0")
    assert not any(line.startswith("  kern80") and "NOT" in line for line in on80.out.splitlines())

    # The store holds the right builds: kern80 with sm_90 code, oldline against torch 2.14's own symbols.
    k90 = make_wheel(tmp_path / "k90", "kern80", "1.0", TAGS, {"kern80/_C.so": sos["sm_90"].read_bytes()})
    right = elf_bytes(needed=("libc10.so",), symbols={_exported_c10_symbol(torch_site): False})
    fixed_line = make_wheel(tmp_path / "new", "oldline", "1.0", TAGS, {"oldline/_C.so": right})
    for wheel in (k90, fixed_line):
        assert run("publish", str(wheel), "--torch", "2.14", "--cuda", "13.0", "--sm", "90",
                   "--allow-unknown-combo").code == 0  # fmt: skip
    fixed = run("pull", "--fix", *machine)
    print(fixed.out, fixed.err)
    assert fixed.code == 1  # xformers: the store has no CUDA 13 build of it
    after = fixed.out.split("after:\n", 1)[1]
    assert "kern80" not in after.replace("kern80 1.0+", "") or "kern80 1.0+cu130torch2.14: runs" in after
    assert "will NOT run" not in "".join(
        line for line in after.splitlines() if "kern80" in line or "oldline" in line
    )
    assert "cannot fix xformers" in fixed.out
    again = run("doctor", "--env", *machine)
    failing = {line.split()[0] for line in again.out.splitlines() if ": will NOT run" in line} & OURS
    assert failing == {"xformers"}, again.out


def _source(tmp_path: Path, name: str) -> Path:
    """tests/data/torchkern as the package ``name`` (its module ``name._C``): two extensions in one venv."""
    src = tmp_path / f"{name}-src"
    shutil.copytree(TORCHKERN, src)
    (src / "torchkern").rename(src / name)
    setup = (
        (src / "setup.py").read_text().replace('"torchkern', f'"{name}').replace("torchkern._C", f"{name}._C")
    )
    (src / "setup.py").write_text(setup)
    return src


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: the extensions are compiled")
def test_with_extensions_built_by_librarian(
    run: Run, torch_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44's done-when with the two extensions made by ``librarian build`` from tests/data/torchkern:
    kern80 for sm80 only against torch 2.14, and oldline against torch 2.12 (PyPI's 2.12.1, CUDA 13.0: its
    C++ symbols are not torch 2.14.1's). The store then holds their sm90 builds against 2.14 and a CUDA 13
    build of xformers, which ``pull --fix --sm 90`` installs: the second judgement is clean. Five compiles,
    two build environments (some GB from PyPI)."""
    monkeypatch.setenv(
        "LIBRARIAN_CACHE", os.environ.get("LIBRARIAN_REAL_BUILD_CACHE", str(tmp_path / "cache"))
    )
    monkeypatch.setenv("LIBRARIAN_TORCH_INDEX", "https://pypi.org/simple")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    glibc = ".".join(os.confstr("CS_GNU_LIBC_VERSION").split()[-1].split(".")[:2])  # built on this host
    common = ("--cuda", "13.0", "--python", PYTHON, "--glibc", glibc)
    kern80, oldline = _source(tmp_path, "kern80"), _source(tmp_path, "oldline")

    def build(src: Path, torch: str, sm: str, *where: str) -> None:
        done = run("build", str(src), "--torch", torch, "--sm", sm, *common, *where)
        assert done.code == 0, done.err

    build(kern80, "2.14", "80", "-o", "dist")
    build(oldline, "2.12", "90", "-o", "dist")
    python = layered_env(tmp_path / "env", torch_site, sorted((tmp_path / "dist").glob("*.whl")))

    machine = ("--python", python, "--sm", "90", "--driver", "13.0")
    judged = run("doctor", "--env", *machine)
    print(judged.out)
    assert judged.code == 1
    failing = {line.split()[0] for line in judged.out.splitlines() if ": will NOT run" in line} & OURS
    assert failing == {"kern80", "oldline", "xformers"}, judged.out
    lines = judged.out.splitlines()
    assert any(line.startswith("  kern80 0.1.0+cu130torch2.14: will NOT run (GPU arch:") for line in lines)
    assert any(line.startswith("  oldline 0.1.0+cu130torch2.12: will NOT run (torch:") for line in lines)
    on80 = run("doctor", "--env", "--python", python, "--sm", "80", "--driver", "13.0")
    assert not any(line.startswith("  kern80") and "NOT" in line for line in on80.out.splitlines()), on80.out

    build(kern80, "2.14", "90", "--repo", "store", "--create")
    build(oldline, "2.14", "90", "--repo", "store")
    # PyPI's xformers 0.0.35 is a CUDA 12 build; the store gets its CUDA 13 build for sm90, from its sdist
    # (its flash-attention kernels left out: 13 compile steps, not hundreds).
    monkeypatch.setenv("XFORMERS_DISABLE_FLASH_ATTN", "1")
    done = run("build", "xformers==0.0.35", "--torch", "2.14", "--sm", "90", *common, "--repo", "store")
    assert done.code == 0, done.err
    fixed = run("pull", "--fix", *machine, "--repo", "store")
    print(fixed.out, fixed.err)
    after = fixed.out.split("after:\n", 1)[1]
    assert not any(name in after for name in ("kern80", "oldline", "xformers")), after
    again = run("doctor", "--env", *machine)
    every = {line.split()[0] for line in again.out.splitlines() if ": will NOT run" in line}
    assert every & OURS == set(), again.out  # the second judgement is clean for all the test installed
    assert fixed.code == (1 if every else 0)  # a package the given torch venv brought may still fail
    assert "  kern80 0.1.0+cu130torch2.14: runs" in again.out.splitlines()
    assert any(line.startswith("  xformers 0.0.35+cu130torch2.14: runs") for line in again.out.splitlines())
    assert "  oldline 0.1.0+cu130torch2.14: runs" in again.out.splitlines()
