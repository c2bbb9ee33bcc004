"""``doctor --env``: the installed packages of an environment with native code, each judged by the one
judgement from its installed files (issue 44, item 1, first part).

The environment is a real venv (``--without-pip``: its interpreter, its own site-packages) into which the
tests write distributions as an installer leaves them: ``*.dist-info`` with METADATA, WHEEL and RECORD, the
files at the paths RECORD names. The native files are the nvcc fixtures (``sm_80``, ``sm_90`` SASS).
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import HERE_TAG
from tests.conftest import Run
from tests.gpu_wheels import gpu_sos, isolate_machine

MACHINE = ("--torch", "2.9", "--cuda", "13.0", "--driver", "13.0")


@pytest.fixture(scope="module")
def sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gpu_sos(tmp_path_factory)


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")


def install(
    site: Path,
    name: str,
    files: dict[str, bytes],
    *,
    record: bool = True,
    tag: str = HERE_TAG,
    version: str = "1.0",
) -> None:
    """``name`` ``version`` as pip leaves it: the files, then dist-info with METADATA, WHEEL and RECORD."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    rows = []
    for member, data in files.items():
        path = site / member
        path.parent.mkdir(parents=True, exist_ok=True)
        if not member.startswith(".."):
            path.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{member},sha256={digest},{len(data)}")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
    if record:
        (info / "RECORD").write_text("\n".join([*rows, f"{name}-{version}.dist-info/RECORD,,"]) + "\n")


@pytest.fixture
def venv(tmp_path: Path) -> tuple[Path, Path]:
    """A real venv without pip: its python and its site-packages."""
    where = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    (site,) = where.glob("lib/python*/site-packages")
    return where / "bin" / "python", site


def test_doctor_env_names_each_package_that_will_not_run_and_why(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    python, site = venv
    install(site, "kern80", {"kern80/_C.so": sos["sm_80"].read_bytes(), "kern80/__init__.py": b""})
    install(site, "kern90", {"kern90/_C.so": sos["sm_90"].read_bytes()})
    install(site, "puremod", {"puremod.py": b"X = 1\n"})  # no native code: not listed
    install(site, "edited", {"edited/_C.so": sos["sm_90"].read_bytes()})
    (site / "edited" / "_C.so").write_bytes(sos["sm_90"].read_bytes() + b"\0")  # changed after install
    install(site, "escaper", {"../../../evil.so": b"\x7fELF"})
    install(site, "handmade", {"handmade/_C.so": sos["sm_90"].read_bytes()}, record=False)
    result = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE)
    assert result.code == 1, result.out + result.err
    lines = result.out.splitlines()
    assert lines[0].startswith(f"{python} (") and "distribution(s) with native code" in lines[0]
    assert any(
        line.startswith("  kern80 1.0: will NOT run (GPU arch: kern80/_C.so has no code for sm_90")
        for line in lines
    ), result.out
    assert "      at run time: CUDA error: no kernel image is available for execution on the device" in lines
    assert "  kern90 1.0: runs" in lines
    assert not any("puremod" in line for line in lines)
    assert any("edited/_C.so:" in line and "RECORD says" in line and "(edited?)" in line for line in lines)
    assert any("escaper 1.0: not judged: ../../../evil.so: outside site-packages" in line for line in lines)
    # no RECORD: its files found through its package folder, said so, and judged
    assert "  handmade 1.0: runs" in lines
    assert (
        "      no RECORD (installed by conda or by hand): its files found through its package folder" in lines
    )
    clean = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE, "--json")
    doc = json.loads(clean.out)
    by_name = {d["name"]: d for d in doc["distributions"]}
    assert by_name["kern80"]["runs"] is False and by_name["kern90"]["runs"] is True
    assert by_name["kern80"]["judgement"]["verdicts"]


def test_doctor_env_of_something_that_is_no_environment_is_one_line(run: Run, tmp_path: Path) -> None:
    result = run("doctor", "--env", "--python", str(tmp_path / "nothing"), "--sm", "90", *MACHINE)
    assert result.code == 2 and result.err.count("\n") == 1 and result.err.startswith("librarian: error: ")
    both = run("doctor", "x.whl", "--env", "--sm", "90", *MACHINE)
    assert both.code == 2 and "--env: judges the installed packages" in both.err


def test_the_target_interpreter_is_run_once(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path], tmp_path: Path
) -> None:
    # Its sys.path, read by the probe that described the machine, says where to look: no second run.
    python, site = venv
    install(site, "kern90", {"kern90/_C.so": sos["sm_90"].read_bytes()})
    log = tmp_path / "runs.log"  # each start of that interpreter appends a line
    (site / "sitecustomize.py").write_text(f"open({str(log)!r}, 'a').write('run\\n')\n")
    result = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE)
    assert result.code == 0, result.out + result.err
    assert "kern90 1.0: runs" in result.out
    assert log.read_text().splitlines() == ["run"]


def test_pull_fix_replaces_what_will_not_run_with_the_stored_build_that_does(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path], tmp_path: Path
) -> None:
    """kern80 1.0 is installed with sm_80 code only; the store holds kern80 1.0 built for sm90. On an sm90
    machine pull --fix says so (--dry-run: nothing installed), then installs the stored build, and the
    environment judged again runs. other80, which the store lacks, is named with the line that makes it."""
    from tests.gpu_wheels import so_wheel

    python, site = venv
    install(site, "kern80", {"kern80/__init__.py": b"", "kern80/_C.so": sos["sm_80"].read_bytes()})
    install(site, "other80", {"other80/_C.so": sos["sm_80"].read_bytes()})
    built = so_wheel(tmp_path / "dist", sos["sm_90"], name="kern80", version="1.0", tags=HERE_TAG)
    assert run("publish", str(built), "--torch", "2.9", "--cuda", "13.0").code == 0
    machine = ("--python", str(python), "--sm", "90", *MACHINE)
    planned = run("pull", "--fix", "--dry-run", *machine)
    assert planned.code == 1, planned.err  # as the run would leave it: other80 cannot be fixed (issue 53)
    assert "  kern80 1.0: will NOT run (GPU arch: kern80/_C.so has no code for sm_90" in planned.out
    assert (
        f"would replace kern80 1.0 with kern80-1.0+cu130torch2.9-{HERE_TAG}.whl (the installed version, 1.0)"
        in planned.out
    )
    assert (
        "cannot fix other80 1.0: not in wheelhouse; make it: librarian pull other80==1.0 --build --publish"
        in planned.out
    )
    assert (site / "kern80" / "_C.so").read_bytes() == sos["sm_80"].read_bytes()  # a dry run installs nothing
    fixed = run("pull", "--fix", *machine)
    assert fixed.code == 1, fixed.err  # other80 still will not run
    assert (site / "kern80" / "_C.so").read_bytes() == sos["sm_90"].read_bytes()
    after = fixed.out.split("after:\n", 1)[1]
    assert "other80 1.0: will NOT run" in after and "kern80" not in after
    doctor = run("doctor", "--env", *machine)
    assert "  kern80 1.0+cu130torch2.9: runs" in doctor.out.splitlines()


def test_a_distribution_without_record_is_found_through_top_level_txt(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    """Issue 44: a conda-installed package has no RECORD; its top_level.txt names what it installed (here a
    folder and a single-file extension module), and those files are judged; one with nothing found says so."""
    python, site = venv
    install(site, "condapkg", {"cpkg/_C.so": sos["sm_80"].read_bytes(), "_cpkg_ext.so": sos["sm_90"].read_bytes()},
            record=False)  # fmt: skip
    (site / "condapkg-1.0.dist-info" / "top_level.txt").write_text("cpkg\n_cpkg_ext\n")
    install(site, "emptyconda", {"emptyconda.py": b""}, record=False)
    (site / "cpkg" / "link.so").symlink_to("/etc/passwd")  # not followed
    result = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE, "-v")
    assert result.code == 0, result.out + result.err  # runs partly: the sm_90 module runs, cpkg/_C.so not
    lines = result.out.splitlines()
    assert "  condapkg 1.0: runs, partly (cpkg/_C.so cannot run on this GPU)" in lines, result.out
    assert "      no RECORD (installed by conda or by hand): its files found through top_level.txt" in lines
    assert "sm_80, sm_90" in result.out and "link.so" not in result.out  # both modules read; the link not
    assert any(
        "emptyconda 1.0: not judged: no RECORD" in line and "no native files found" in line for line in lines
    )


def test_a_second_copy_of_a_cuda_library_beside_the_nvidia_one_is_named(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    """Issue 44: a package shipping its own libcublas beside nvidia-cublas's: one line on that package."""
    from tests.cuda_fixtures import elf_bytes

    python, site = venv
    lib = elf_bytes(soname="libcublas.so.13")
    install(site, "nvidia-cublas", {"nvidia/cu13/lib/libcublas.so.13": lib})
    install(site, "bundler", {"bundler/_C.so": sos["sm_90"].read_bytes(), "bundler/lib/libcublas.so.12": lib})
    result = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE)
    assert (
        "      bundler/lib/libcublas.so.12: a second copy of cublas beside nvidia-cublas's "
        "nvidia/cu13/lib/libcublas.so.13 (one process loads one; which depends on the load order)"
    ) in result.out.splitlines(), result.out
    assert "nvidia-cublas 1.0: runs" in result.out and result.out.count("a second copy") == 1


def test_torch_is_not_asked_for_its_own_symbols_but_an_extension_is(tmp_path: Path) -> None:
    """torch's own libraries import what they export to one another (libtorch_cuda from libtorch_cpu: 7,288
    symbols on PyPI's 2.14.1): it is judged as itself, not as an extension of the torch installed, while an
    extension importing a symbol that torch does not export will not run."""
    from librarian.machine import Machine, Probed, TorchInfo
    from librarian.ops.machine.environment import judge_environment
    from librarian.probe.installed import Installed
    from tests.cuda_fixtures import elf_bytes

    symbol = "_ZN2at6native9gone_awayEv"
    so = elf_bytes(needed=("libc10.so",), symbols={symbol: False})
    for name in ("torch", "ext"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "_C.so").write_bytes(so)
    exports = frozenset({"_ZN3c106detail14torchCheckFailEv"})  # what the installed libc10 says it exports
    machine = Machine(torch=Probed.found(TorchInfo("2.9.1", (13, 0), None, exports=exports), "test"))
    tag = HERE_TAG
    dists = [
        Installed("torch", "2.9.1", tag, tmp_path, ("torch/_C.so",)),
        Installed("ext", "1.0+cu130torch2.9", tag, tmp_path, ("ext/_C.so",)),
    ]
    torch_judged, ext_judged = judge_environment(dists, machine, jobs=1)
    assert torch_judged.report is not None and ext_judged.report is not None
    (own,) = [v for v in torch_judged.report.verdicts if v.demand.value == "torch"]
    assert own.ok is True, own
    assert ext_judged.report.runs is False
    (failure,) = ext_judged.report.failures
    assert failure.demand.value == "torch" and failure.predicted_error == f"undefined symbol: {symbol}"


def test_a_failed_install_in_pull_fix_leaves_the_environment_as_it_was(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """pip installs each replacement after it has set the old files aside, and on a failure puts them back
    (pip's own rollback). Here the stored build of kern80 holds a file where another installed package
    keeps a folder, so pip fails after kern80 1.0 was uninstalled: the old files are back, the exit is 1 in
    one line, and the environment is judged as before (said, after the failure, then the error)."""
    from tests.builders import make_wheel

    where = tmp_path / "venv"  # with pip: pull --fix installs with the target's own pip
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    (site,) = where.glob("lib/python*/site-packages")
    install(site, "kern80", {"kern80/__init__.py": b"", "kern80/_C.so": sos["sm_80"].read_bytes()})
    install(site, "plugins", {"kern80/extra/plugin.py": b"X = 1\n"})  # a folder inside kern80's, not kern80's
    files = {"kern80/__init__.py": b"", "kern80/_C.so": sos["sm_90"].read_bytes(), "kern80/extra": b"a file"}
    built = make_wheel(tmp_path / "dist", "kern80", "1.0", HERE_TAG, files)
    assert run("publish", str(built), "--torch", "2.9", "--cuda", "13.0").code == 0
    machine = ("--python", str(python), "--sm", "90", *MACHINE)
    before = run("doctor", "--env", *machine, "--json").out

    fixed = run("pull", "--fix", *machine)
    assert fixed.code == 2
    assert fixed.err.strip().splitlines()[-1].startswith("librarian: error:"), fixed.err
    after = fixed.out.split("after (the install failed):\n", 1)[1]
    assert "  kern80 1.0: will NOT run (GPU arch: kern80/_C.so has no code for sm_90" in after
    assert "Traceback" not in fixed.err
    assert (site / "kern80" / "_C.so").read_bytes() == sos["sm_80"].read_bytes()  # pip put it back
    assert (site / "kern80" / "extra" / "plugin.py").read_text() == "X = 1\n"
    assert run("doctor", "--env", *machine, "--json").out == before


def test_files_that_cannot_be_read_are_each_one_line_and_a_2gb_library_is_read_by_its_headers(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    """A truncated ELF, a text file named .so and a FIFO among a package's native files: one line each,
    named by its path in the environment, no traceback; the package is judged on the files that can be read
    (said "may run"). A 2 GB library (sparse: a real .so, then zeros) is judged by its headers."""
    import os

    python, site = venv
    real = sos["sm_90"].read_bytes()
    install(site, "bad", {"bad/trunc.so": real[:200], "bad/notelf.so": b"hello\n", "bad/big.so": real})
    with (site / "bad" / "big.so").open("r+b") as f:
        f.truncate(2 << 30)
    record = site / "bad-1.0.dist-info" / "RECORD"
    rows = [r for r in record.read_text().splitlines() if not r.startswith("bad/big.so,")]
    record.write_text("\n".join([*rows, "bad/big.so,,2147483648", "bad/pipe.so,,0"]) + "\n")
    os.mkfifo(site / "bad" / "pipe.so")
    result = run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE)
    assert result.code == 0 and "Traceback" not in result.err, result.err
    lines = result.out.splitlines()
    assert "  bad 1.0: may run (its readable files run; 2 could not be read)" in lines, result.out
    assert any(line.startswith("      bad/trunc.so: truncated") and "not judged" in line for line in lines)
    assert "      bad/notelf.so: not a wheel, nor an ELF, PE or Mach-O binary; not judged" in lines
    assert "      bad/pipe.so: a FIFO, not a file" in lines
    assert not any("big.so" in line for line in lines), result.out  # read by its headers, and it runs
    doc = json.loads(run("doctor", "--env", "--python", str(python), "--sm", "90", *MACHINE, "--json").out)
    (bad,) = [d for d in doc["distributions"] if d["name"] == "bad"]
    assert (
        bad["runs"] is None
        and len(bad["not_read"]) == 2
        and bad["problems"] == ["bad/pipe.so: a FIFO, not a file"]
    )


def test_a_torch_whose_own_files_were_written_over_is_never_runs_here(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 54: torch's judgement holds its own files to its RECORD (the small ones by their sha256), so a
    torch another install wrote over is 'may NOT import', listed by pull --fix as unfixable by a store (the
    pip line that puts it back), and never under 'every package with native code runs here'."""
    python, site = venv
    install(site, "torch", {"torch/__init__.py": b"import torch._C\n", "torch/lib/libtorch_x.so": sos["sm_90"].read_bytes()})  # fmt: skip
    machine = ("--python", str(python), "--sm", "90", *MACHINE)
    assert "  torch 1.0: runs" in run("doctor", "--env", *machine).out.splitlines()
    (site / "torch" / "__init__.py").write_bytes(b"import torch._X\n")  # the same size: its sha256 differs

    doctor = run("doctor", "--env", *machine)
    lines = doctor.out.splitlines()
    assert any(
        line.startswith("  torch 1.0: may NOT import: its own files are not those it installed")
        for line in lines
    )
    assert "      torch/__init__.py: its bytes are not its RECORD's" in lines, doctor.out
    assert json.loads(run("doctor", "--env", *machine, "--json").out)["distributions"][0]["altered"] == [
        "torch/__init__.py: its bytes are not its RECORD's"
    ]
    fixed = run("pull", "--fix", *machine)
    assert fixed.code == 1 and "runs here" not in fixed.out
    assert "cannot fix torch 1.0: its own files are not those it installed" in fixed.out
    assert "pip install --force-reinstall --no-deps torch==1.0" in fixed.out


def test_an_install_that_writes_over_torch_is_an_error_naming_the_file(
    run: Run, venv: tuple[Path, Path], sos: dict[str, Path], tmp_path: Path
) -> None:
    """The ownership checks refuse a wheel with torch's files before an install; should an installer still
    write over torch (here a stand-in for uv that does), pull --install says so, in one line, exit 2."""
    from tests.gpu_wheels import so_wheel

    python, site = venv
    install(site, "torch", {"torch/__init__.py": b"import torch._C\n"})
    uv = tmp_path / "bin" / "uv"  # first on PATH (the venv has no pip: librarian installs with uv)
    uv.write_text(f"#!/bin/sh\nprintf 'broken!!!!!!!!!\\n' > {site}/torch/__init__.py\n")
    uv.chmod(0o755)
    built = so_wheel(tmp_path / "dist", sos["sm_90"], name="kern90", version="1.0", tags=HERE_TAG)
    assert run("publish", str(built), "--torch", "2.9", "--cuda", "13.0").code == 0

    pulled = run("pull", "kern90", "--install", "--python", str(python), "--sm", "90", *MACHINE)

    assert pulled.code == 2, pulled.out + pulled.err
    assert pulled.err.count("\n") == 1 and "Traceback" not in pulled.err
    assert (
        "after the install, torch's own files are not those it installed: torch/__init__.py: its bytes"
        in pulled.err
    )


def test_pull_fix_of_two_packages_says_which_it_kept_when_the_second_fails(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """pip undoes only the package it fails on: the first replacement stays, and pull --fix says so."""
    from tests.builders import make_wheel

    where = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    (site,) = where.glob("lib/python*/site-packages")
    for name in ("akern", "zkern"):
        install(site, name, {f"{name}/__init__.py": b"", f"{name}/_C.so": sos["sm_80"].read_bytes()})
        files = {f"{name}/__init__.py": b"", f"{name}/_C.so": sos["sm_90"].read_bytes()}
        if name == "zkern":  # a file where another installed package keeps a folder: pip fails on it
            install(site, "plugins", {"zkern/extra/plugin.py": b"X = 1\n"})
            files["zkern/extra"] = b"a file"
        built = make_wheel(tmp_path / "dist", name, "1.0", HERE_TAG, files)
        assert run("publish", str(built), "--torch", "2.9", "--cuda", "13.0").code == 0

    fixed = run("pull", "--fix", "--python", str(python), "--sm", "90", *MACHINE)

    assert fixed.code == 2 and "Traceback" not in fixed.err
    assert (site / "akern" / "_C.so").read_bytes() == sos["sm_90"].read_bytes()  # replaced, kept
    assert (site / "zkern" / "_C.so").read_bytes() == sos["sm_80"].read_bytes()  # pip put it back
    assert (
        f"replaced before the failure, and kept (pip undoes only the one it failed on): akern (now "
        f"akern-1.0+cu130torch2.9-{HERE_TAG}.whl)" in fixed.out
    ), fixed.out
