"""``pull --fix`` and ``doctor --env`` tell the truth (issue 53, item 3): a dry run exits as the run would
leave the environment (1 while anything cannot be fixed), torch itself is never offered for a build or a
store's replacement (which of PyTorch's own builds has code for this GPU instead), a package that runs only
partly is replaced like one that does not run, and in a venv without torch a wheel whose bytes link no torch
is judged against the driver (its label's CUDA line says how it was built, not a torch it needs).

The environments are real venvs written as pip leaves them (``tests.test_doctor_env.install``); the native
files are the nvcc fixtures.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests import test_doctor_env as base
from tests.builders import HERE_TAG, make_wheel
from tests.conftest import Run
from tests.gpu_wheels import so_wheel
from tests.test_doctor_env import MACHINE, install

sos, bare, venv = base.sos, base.bare, base.venv


def test_a_dry_run_exits_1_while_something_cannot_be_fixed(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    python, site = venv
    install(site, "orphan80", {"orphan80/_C.so": sos["sm_80"].read_bytes()})  # the store has nothing for it
    machine = ("--python", str(python), "--sm", "90", *MACHINE)
    run("publish", str(so_wheel(Path("dist"), sos["sm_90"], name="other", tags=HERE_TAG)), "--torch", "2.9",
        "--cuda", "13.0")  # fmt: skip  # a store to look in
    dry = run("pull", "--fix", "--dry-run", *machine)
    assert dry.code == 1 and "cannot fix orphan80 1.0: not in wheelhouse" in dry.out, dry.out + dry.err
    assert (site / "orphan80" / "_C.so").read_bytes() == sos["sm_80"].read_bytes()  # nothing installed


def test_torch_is_never_offered_for_a_build_and_its_own_build_for_this_gpu_is_named(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    python, site = venv
    files = {"torch/__init__.py": b"", "torch/lib/libtorch_cuda.so": sos["sm_80"].read_bytes()}
    install(site, "torch", files, version="2.9.0")
    run("publish", str(so_wheel(Path("dist"), sos["sm_90"], name="other", tags=HERE_TAG)), "--torch", "2.9",
        "--cuda", "13.0")  # fmt: skip
    dry = run("pull", "--fix", "--dry-run", "--python", str(python), "--sm", "75", *MACHINE)
    assert dry.code == 1, dry.out + dry.err
    (line,) = [x for x in dry.out.splitlines() if x.startswith("cannot fix torch 2.9.0:")]
    assert "librarian never builds or replaces torch itself (it has no code for sm_75 here)" in line
    assert "--build" not in line and "pip install --force-reinstall torch==2.9.0 --index-url " in line
    assert "https://download.pytorch.org/whl/cu1" in line and "has code for it" in line


def test_a_package_that_runs_only_partly_is_replaced(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path], tmp_path: Path
) -> None:
    """A mutant that skipped partly-running packages survived the suite (issue 53, item 7)."""
    python, site = venv
    install(site, "halfkern", {"halfkern/_A.so": sos["sm_90"].read_bytes(), "halfkern/_B.so": sos["sm_80"].read_bytes()})  # fmt: skip
    both = {"halfkern/__init__.py": b"", "halfkern/_A.so": sos["sm_90"].read_bytes(),
            "halfkern/_B.so": sos["sm_90"].read_bytes()}  # fmt: skip
    built = make_wheel(tmp_path / "dist", "halfkern", "1.0", HERE_TAG, both)
    assert run("publish", str(built), "--torch", "2.9", "--cuda", "13.0").code == 0
    machine = ("--python", str(python), "--sm", "90", *MACHINE)
    before = run("doctor", "--env", *machine)
    assert "halfkern 1.0: runs, partly" in before.out, before.out
    fixed = run("pull", "--fix", *machine)
    assert fixed.code == 0 and "replace halfkern 1.0 with halfkern-1.0+cu130torch2.9-" in fixed.out, fixed.out
    assert (site / "halfkern" / "_B.so").read_bytes() == sos["sm_90"].read_bytes()


def test_a_torch_free_labelled_wheel_in_a_venv_without_torch_is_judged_by_the_driver(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path], tmp_path: Path
) -> None:
    """After a fix, a wheel filed with a label that links no torch was "may run (some parts unknown)" in a
    venv without torch: its label's CUDA was judged against a torch that is not there."""
    python, site = venv
    wheel = so_wheel(
        tmp_path / "w", sos["sm_90"], name="freekern", version="1.0+cu130torch2.9", tags=HERE_TAG
    )
    with zipfile.ZipFile(wheel) as z:
        install(site, "freekern", {"freekern/_C.so": z.read("freekern/_C.so")}, version="1.0+cu130torch2.9")
    doctor = run("doctor", "--env", "--python", str(python), "--sm", "90", "--driver", "13.0")
    assert doctor.code == 0 and "  freekern 1.0+cu130torch2.9: runs" in doctor.out.splitlines(), doctor.out
    old_driver = run("doctor", "--env", "--python", str(python), "--sm", "90", "--driver", "12.8")
    assert "freekern 1.0+cu130torch2.9: will NOT run (CUDA:" in old_driver.out, old_driver.out


def test_doctor_env_holds_an_installed_packages_requires_dist_on_torch(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    """A mutant that ignored the installed METADATA's Requires-Dist on torch survived (issue 53, item 7)."""
    python, site = venv
    install(site, "pinned", {"pinned/_C.so": sos["sm_90"].read_bytes()})
    metadata = site / "pinned-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text() + "Requires-Dist: torch==2.8.0\n")
    install(site, "loose", {"loose/_C.so": sos["sm_90"].read_bytes()})
    doctor = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE)  # torch 2.9
    lines = doctor.out.splitlines()
    assert any(
        x.startswith("  pinned 1.0: will NOT run (torch: its METADATA requires torch==2.8.0") for x in lines
    ), doctor.out
    assert "  loose 1.0: runs" in lines
