"""The target interpreter (issue: act on the user's environment), with real venvs and real pip / uv.

librarian runs from its own environment (this test process); the wheels go to, and the tags and torch are
read from, the environment the user points at: ``--python PATH``, else ``$VIRTUAL_ENV``, else its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from librarian.errors import BadInput
from librarian.probe import torch as probe_torch
from librarian.probe.target import find_target, is_version, parse_probe
from tests.builders import HERE_PYTHON
from tests.conftest import Run
from tests.gpu_wheels import isolate_machine
from tests.test_probe import VERSION_PY, fake_torch

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"
PY = HERE_PYTHON
WANT = ("--sm", "89", "--torch", "2.9", "--cuda", "13.0")


def make_venv(where: Path) -> Path:
    """A real venv without pip (fast); returns its interpreter."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    return where / "bin" / "python"


def site_packages(python: Path) -> Path:
    return python.parent.parent / "lib" / f"python{PY}" / "site-packages"


def version_in(python: Path, name: str) -> str | None:
    code = f"import importlib.metadata as m\ntry: print(m.version({name!r}))\nexcept m.PackageNotFoundError: print('')"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return out or None


def our_pip(*args: str) -> subprocess.CompletedProcess[str]:
    """This environment's pip acting on another interpreter (pip's own --python): no pip needed there."""
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def store(run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The sample wheels published into ./wheelhouse; no GPU and no torch visible to librarian itself."""
    isolate_machine(monkeypatch, tmp_path / "bin")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    result = run("publish", *map(str, sorted(SAMPLES.glob("*.whl"))), "--torch", "2.9", "--cuda", "13.0")
    assert result.code == 0, result.err
    return tmp_path / "wheelhouse"


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("3.12", True),
        ("312", True),
        ("cp312", True),
        ("3", True),
        ("/usr/bin/python3", False),
        ("venv", False),
        (".venv", False),
    ],
)
def test_python_is_a_version_or_a_path(text: str, version: bool) -> None:
    assert is_version(text) is version


def test_the_target_is_the_flag_then_the_active_venv_then_our_own(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "v")
    assert (
        find_target(str(tmp_path / "v"), {}).executable == python
        and find_target(str(python), {}).how == "--python"
    )
    active = find_target(None, {"VIRTUAL_ENV": str(tmp_path / "v")})
    assert active.executable == python and active.how == "VIRTUAL_ENV" and not active.own
    assert (
        find_target("3.12", {"VIRTUAL_ENV": str(tmp_path / "v")}).how == "VIRTUAL_ENV"
    )  # a version is no path
    assert find_target(None, {}).own
    with pytest.raises(BadInput, match="no such interpreter"):
        find_target(str(tmp_path / "nope"), {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="no bin/python"):
        find_target(str(tmp_path / "empty"), {})


def test_a_probe_answer_that_is_not_python_is_one_line() -> None:
    with pytest.raises(BadInput, match="x: did not answer librarian's probe"):
        parse_probe("hello", "x")


def test_doctor_machine_reads_torch_and_tags_from_the_target(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found_torch = probe_torch._find_torch
    isolate_machine(monkeypatch, tmp_path / "bin")
    monkeypatch.setattr(
        probe_torch, "_find_torch", found_torch
    )  # torch is read for real, from the target's sys.path
    python = make_venv(tmp_path / "t")
    fake_torch(site_packages(python), "2.9.1+cu130", VERSION_PY.format("'13.0'"), cmake_abi="1")
    result = run("doctor", "--machine", "--python", str(tmp_path / "t"), "--json")
    assert result.code == 0, result.err
    machine = json.loads(result.out)["machine"]
    assert machine["interpreter"] == {"value": str(python), "source": "--python", "reason": None}
    assert machine["torch"]["value"]["version"] == "2.9.1+cu130" and machine["cuda"]["value"] == "13.0"
    assert machine["python"]["value"] == ".".join(map(str, sys.version_info[:3]))
    # no packaging and no pip there: the tags are computed for its version, glibc and CPU
    assert (
        "computed" in machine["python_tags"]["source"]
        and f"cp{PY.replace('.', '')}" in machine["python_tags"]["value"][0]
    )
    assert version_in(Path(sys.executable), "torch") is None  # librarian's own environment has no torch
    own = json.loads(run("doctor", "--machine", "--json").out)["machine"]
    assert own["torch"]["value"] is None and own["interpreter"]["source"] == "librarian's own interpreter"


def test_retag_takes_the_label_from_the_targets_torch(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    python = make_venv(tmp_path / "t")
    fake_torch(site_packages(python), "2.8.0+cu128", VERSION_PY.format("'12.8'"))
    wheel = min(SAMPLES.glob("*.whl"))
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "t"))
    result = run("retag", str(wheel), "-o", "out")
    assert result.code == 0, result.err
    assert result.out.strip().endswith("tinykern-0.1.0+cu128torch2.8-cp310-cp310-linux_x86_64.whl")


def test_publish_takes_the_label_from_the_torch_of_python_path(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A build venv named by --python, as retag takes it (before, only VIRTUAL_ENV= could say it)."""
    python = make_venv(tmp_path / "build")
    fake_torch(site_packages(python), "2.9.0+cu130", VERSION_PY.format("'13.0'"))  # the samples' CUDA 13.0
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    wheel = min(SAMPLES.glob("*.whl"))
    result = run("publish", str(wheel), "--python", str(tmp_path / "build"))
    assert result.code == 0, result.err
    assert list((tmp_path / "wheelhouse").rglob("tinykern-0.1.0+cu130torch2.9-cp310-cp310-linux_x86_64.whl"))
    refused = run("publish", str(wheel), "--python", "3.12")
    assert refused.code == 2 and "give an interpreter or venv path" in refused.err


def test_retag_refuses_a_python_version_it_cannot_take_a_torch_from(run: Run) -> None:
    result = run("retag", str(min(SAMPLES.glob("*.whl"))), "--python", "3.12", "-o", "out")
    assert result.code == 2
    assert "--python 3.12: give an interpreter or venv path (whose torch gives the label)" in result.err


def test_pull_install_goes_into_the_active_venv(
    run: Run, store: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    python = make_venv(tmp_path / "work")
    assert (
        our_pip("--python", str(python), "install", "-q", "pip").returncode == 0
    )  # a venv as people make them
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "work"))
    result = run("pull", "tinykern", *WANT, "--install", "-o", "pulled")
    assert result.code == 0, result.err
    assert version_in(python, "tinykern") == "0.1.0+cu130torch2.9"
    assert version_in(Path(sys.executable), "tinykern") is None  # nothing into librarian's own


def test_pull_install_without_o_leaves_no_wheel_where_you_stand(
    run: Run, store: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed: list[list[Path]] = []
    monkeypatch.setattr(
        "librarian.ops.machine.installer.install", lambda files, python: installed.append(list(files))
    )
    result = run("pull", "tinykern", *WANT, "--install")
    assert result.code == 0, result.err
    assert len(installed) == 1 and installed[0][0].name.startswith("tinykern-0.1.0+")
    assert not list(tmp_path.glob("*.whl"))  # installed from a temporary folder, gone after
    kept = run("pull", "tinykern", *WANT, "--install", "-o", "wheels")  # -o keeps them where it says
    assert kept.code == 0 and len(list((tmp_path / "wheels").glob("*.whl"))) == 1


def test_pull_install_into_a_venv_without_pip_uses_uv(run: Run, store: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "uvenv")
    result = run("pull", "tinykern", *WANT, "--install", "-o", "pulled", "--python", str(python))
    assert result.code == 0, result.err
    assert version_in(python, "tinykern") == "0.1.0+cu130torch2.9"


def test_requirements_install_exactly_those_bytes_with_pip_and_uv(
    run: Run, store: Path, tmp_path: Path
) -> None:
    result = run("pull", "tinykern", *WANT, "--python", PY, "--requirements", "req.txt")
    assert result.code == 0, result.err
    assert not (
        tmp_path / "tinykern-0.1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    ).exists()  # nothing fetched
    lines = [line for line in (tmp_path / "req.txt").read_text().splitlines() if not line.startswith("#")]
    tag = f"cp{PY.replace('.', '')}"
    stored = store / f"tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-{tag}-{tag}-linux_x86_64.whl"
    assert len(lines) == 1 and lines[0].startswith(f"tinykern @ {stored.as_uri()} --hash=sha256:")
    pip_env = make_venv(tmp_path / "p")
    done = our_pip("--python", str(pip_env), "install", "--no-deps", "-r", str(tmp_path / "req.txt"))
    assert done.returncode == 0, done.stderr
    assert version_in(pip_env, "tinykern") == "0.1.0+cu130torch2.9"
    uv_env = make_venv(tmp_path / "u")
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run(
        [str(uv), "pip", "install", "--python", str(uv_env), "--no-deps", "-r", str(tmp_path / "req.txt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert version_in(uv_env, "tinykern") == "0.1.0+cu130torch2.9"
    # One changed byte in the stored wheel: pip refuses it by its hash.
    data = bytearray(stored.read_bytes())
    data[-30] ^= 0xFF
    os.unlink(stored)  # the cells share one inode: write a new file rather than change them all
    stored.write_bytes(bytes(data))
    tampered = our_pip(
        "--python", str(make_venv(tmp_path / "q")), "install", "--no-deps", "-r", str(tmp_path / "req.txt")
    )
    assert tampered.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in tampered.stderr


def test_install_and_requirements_do_not_mix(run: Run, store: Path) -> None:
    result = run("pull", "tinykern", *WANT, "--install", "--requirements", "r.txt")
    assert result.code == 2 and "choose one" in result.err


@pytest.mark.network
def test_installed_as_a_uv_tool_it_acts_on_the_active_venv(store: Path, tmp_path: Path) -> None:
    """``uv tool install`` from the checkout (fetches librarian's dependencies: opt-in), then a pull."""
    uv = str(Path(sys.executable).parent / "uv")
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "tbin")}
    checkout = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [uv, "tool", "install", str(checkout)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    python = make_venv(tmp_path / "work")
    assert our_pip("--python", str(python), "install", "-q", "pip").returncode == 0
    env.pop("VIRTUAL_ENV", None)
    pulled = subprocess.run(
        [str(tmp_path / "tbin/librarian"), "pull", "tinykern", *WANT, "--install", "-o", "out"],
        cwd=tmp_path,
        env={**env, "VIRTUAL_ENV": str(tmp_path / "work")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pulled.returncode == 0, pulled.stderr
    assert version_in(python, "tinykern") == "0.1.0+cu130torch2.9"


def test_a_relative_python_path_is_used_as_given_never_looked_up_on_path(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")
    python = make_venv(tmp_path / "t")
    here = tmp_path / "work"
    here.mkdir()
    (here / "python3").symlink_to(python)  # ./python3 is this venv's; the python3 on PATH is another
    monkeypatch.chdir(here)
    assert find_target("./python3", {}).executable == here / "python3"
    result = run("doctor", "--machine", "--python", "./python3", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["machine"]["interpreter"]["value"] == str(here / "python3")


def test_install_refuses_a_python_version_that_is_not_the_target_s_before_downloading(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")
    other = "3.12" if PY != "3.12" else "3.11"
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)  # the target: librarian's own interpreter, Python PY
    result = run(
        "pull",
        "tinykern",
        "--sm",
        "89",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--python",
        other,
        "--install",
        "-o",
        "out",
        "--repo",
        "nowhere",
    )
    assert result.code == 2 and result.err.count("\n") == 1, result
    assert f"--python {other}: --install installs into {sys.executable}, which is Python {PY}" in result.err
    assert not (tmp_path / "out").exists()  # refused before a store was even opened
