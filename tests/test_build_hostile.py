"""A build holds its source to what was asked and ends whole: hostile sources (issue 42, items 1, 3, 4, 5).

Each source is a small setuptools project whose setup.py misbehaves one way: it makes another package,
torch itself or another Python's wheel; it forks a detached child, holds the output pipe, floods its
output, sends librarian SIGTERM, or reads the Hub token. They compile nothing, so nvcc is a stand-in
script of the combo's CUDA release (``CUDA_HOME``); pip reaches no index (the build tools are wheels of
this environment's own). Each ends in one line, nothing filed, no process left (looked up in ``/proc``)
and no secret printed or logged.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from librarian.ops.build.build_run import BuildLog
from tests.builders import stand_in_torch
from tests.conftest import Result, Run
from tests.test_build import PYTHON, _fake_nvcc, build_tools, offline_pip  # noqa: F401 (build_tools: a fixture)

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes in /proc")

COMBO = ("--torch", "2.9", "--cuda", "13.0", "--python", PYTHON)
SETUP = """\
import os, signal, subprocess, sys, time
from setuptools import setup, Distribution
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel
{action}

class Tagged(bdist_wheel):
    def get_tag(self):
        tag = super().get_tag()
        return ({python_tag!r} or tag[0], {python_tag!r} or tag[1], tag[2])

class Binary(Distribution):
    def has_ext_modules(self):
        return {binary}

setup(name={name!r}, version={version!r}, py_modules=["hostile_mod"], distclass=Binary,
      cmdclass={{"bdist_wheel": Tagged}})
"""


def hostile_source(
    tmp_path: Path,
    action: str = "",
    *,
    name: str = "tinykern",
    version: str = "0.1.0",
    binary: bool = True,
    python_tag: str = "",
    pyproject: str | None = None,
) -> Path:
    """A source folder whose setup.py runs ``action`` and makes a wheel of ``name``."""
    src = tmp_path / f"src-{uuid.uuid4().hex[:8]}"
    src.mkdir()
    (src / "hostile_mod.py").write_text("X = 1\n")
    (src / "setup.py").write_text(
        SETUP.format(action=action, name=name, version=version, binary=binary, python_tag=python_tag)
    )
    if pyproject is not None:
        (src / "pyproject.toml").write_text(pyproject)
    return src


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the module: the first build makes the environment, the others reuse it."""
    return tmp_path_factory.mktemp("hostile-cache")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_tools: Path, shared_cache: Path) -> Path:  # noqa: F811
    """The combo's stand-ins: nvcc 13.0 in CUDA_HOME, torch 2.9.0+cu130 in a folder, pip offline; the
    temporary folder in ``tmp_path``, the build cache shared. Returns the torch folder."""
    offline_pip(monkeypatch, build_tools)
    _fake_nvcc(tmp_path / "cuda" / "bin", "13.0")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("LIBRARIAN_CACHE", str(shared_cache))
    monkeypatch.setenv("LIBRARIAN_BUILD_INSTALLER", "pip")
    monkeypatch.delenv("MAX_JOBS", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    return stand_in_torch(tmp_path / "torch")


def build(run: Run, torch: Path, src: Path, *argv: str) -> Result:
    return run("build", str(src), *COMBO, "--sm", "89", "--torch-index", str(torch), *argv)


def error_line(result: Result) -> str:
    (line,) = [x for x in result.err.splitlines() if x.startswith("librarian: error:")]
    return line


def running(marker: str) -> list[int]:
    """The processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def nothing_left(marker: str) -> bool:
    deadline = time.monotonic() + 60  # a loaded machine's margin: they are gone at once
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return running(marker) == []


def log_of(result: Result) -> Path:
    """The build's log, as its notes name it."""
    (line,) = [x for x in result.err.splitlines() if x.startswith("librarian: note: log: ")]
    return Path(line.removeprefix("librarian: note: log: "))


# --- the wheel built is the one asked ----------------------------------------------------------------


def test_a_source_that_builds_torch_is_refused_and_nothing_is_filed(
    run: Run, tmp_path: Path, env: Path
) -> None:
    result = build(run, env, hostile_source(tmp_path, name="torch", version="2.9.0"))
    assert result.code == 1, result.err
    line = error_line(result)
    assert "the build made torch-2.9.0-" in line and "a package of the build environment" in line
    assert not (tmp_path / "wheelhouse").exists()


def job(**more: object) -> str:
    """One plan job for tinykern 0.1.0 on sm89 of this combo, as plan --github writes it."""
    import json

    entry = {"torch": "2.9", "cuda": "13.0", "python-tag": f"cp{PYTHON.replace('.', '')}",
             "platform": "linux-x86_64", "cells": ["sm89"], "package": "tinykern", "version": "0.1.0", **more}  # fmt: skip
    return json.dumps(entry)


def test_a_wheel_of_another_package_than_the_job_or_the_pull_names_is_refused(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = hostile_source(tmp_path, name="victim")
    result = run("build", str(src), "--job", job(), "--torch-index", str(env))
    assert result.code == 1, result.err
    assert "a wheel of victim, not tinykern; nothing is filed" in error_line(result)
    samples = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))
    assert run("publish", *map(str, samples), "--torch", "2.9", "--cuda", "13.0").code == 0  # sm75-sm90
    monkeypatch.setenv("LIBRARIAN_TORCH_INDEX", str(env))
    installed: list[object] = []
    monkeypatch.setattr(
        "librarian.ops.machine.installer.install", lambda files, python: installed.append(files)
    )
    pulled = run("pull", "tinykern", "--sm", "120", "--torch", "2.9", "--cuda", "13.0", "--python", PYTHON,
                 "--platform", "linux_x86_64", "--build", "--source", str(src), "--publish", "--install",
                 "-o", "wb")  # fmt: skip
    assert pulled.code == 1, pulled.err
    assert "a wheel of victim, not tinykern; nothing is filed" in error_line(pulled)
    assert installed == [] and not (tmp_path / "wb").exists()
    assert not (tmp_path / "wheelhouse" / "tinykern" / "sm120").exists()
    assert not (tmp_path / "wheelhouse" / "victim").exists()


def test_a_wheel_of_another_version_than_the_job_pins_is_refused(run: Run, tmp_path: Path, env: Path) -> None:
    src = hostile_source(tmp_path)
    result = run("build", str(src), "--job", job(version="0.2.0"), "--torch-index", str(env), "-o", "out")
    assert result.code == 1, result.err
    assert "version 0.1.0, not 0.2.0; nothing is filed" in error_line(result)
    assert not (tmp_path / "out").exists()


def test_a_wheel_for_another_python_is_refused(run: Run, tmp_path: Path, env: Path) -> None:
    src = hostile_source(tmp_path, python_tag="cp39")
    result = build(run, env, src, "-o", "out")
    assert result.code == 1, result.err
    line = error_line(result)
    assert (
        "tinykern-0.1.0-cp39-" in line and f"tags are for no cp{PYTHON.replace('.', '')} interpreter" in line
    )
    assert not (tmp_path / "out").exists()


def test_publish_never_files_torch_itself(run: Run, tmp_path: Path) -> None:
    from tests.builders import make_wheel

    wheel = make_wheel(tmp_path / "dist", name="torch", version="2.9.0", tags="cp311-cp311-linux_x86_64")
    result = run("publish", str(wheel), "--torch", "2.9", "--cuda", "13.0", "--sm", "89")
    assert result.code == 2 and "torch itself is never filed" in error_line(result)
    assert not (tmp_path / "wheelhouse").exists()


# --- another platform: refused before anything is made ------------------------------------------------


def test_another_platform_is_refused_in_one_line_with_no_environment_made(
    run: Run, tmp_path: Path, env: Path
) -> None:
    src = hostile_source(tmp_path)
    result = run("build", str(src), *COMBO, "--sm", "90", "--platform", "linux-aarch64", "--repo", "s8")
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1
    line = error_line(result)
    assert "--platform linux-aarch64: this host is linux-x86_64" in line
    assert "runs-on ubuntu-22.04-arm, container pytorch/manylinuxaarch64-builder:cuda13.0" in line
    pulled = run("pull", "tinykern", "--sm", "89", "--torch", "2.9", "--cuda", "13.0", "--python", PYTHON,
                 "--platform", "win_amd64", "--build", "--source", str(src), "-o", "wb")  # fmt: skip
    assert pulled.code == 2, pulled.err
    assert "--platform windows-amd64: this host is linux-x86_64" in error_line(pulled)
    assert (
        not (tmp_path / "cache").exists()
        and not (tmp_path / "s8").exists()
        and not (tmp_path / "wb").exists()
    )


# --- processes, signals, output, secrets ----------------------------------------------------------------


def test_a_detached_child_and_a_pipe_holder_do_not_outlive_the_build(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setup.py starts a child in a session of its own (setsid), and another that keeps the output pipe
    open; the build ends within the grace period and neither runs on."""
    marker = f"hostile-{uuid.uuid4().hex}"
    action = (
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}-detached'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}-pipe'],"
        " start_new_session=True)\n"
    )
    monkeypatch.setenv("LIBRARIAN_BUILD_GRACE", "2")
    started = time.monotonic()
    result = build(run, env, hostile_source(tmp_path, action), "-o", "out")
    took = time.monotonic() - started
    assert result.code == 0, result.err
    assert took < 120, took  # the pipe holder alone would hold it 600 s
    assert nothing_left(marker)


def test_sigterm_mid_build_is_exit_143_one_line_nothing_filed_nothing_left(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"hostile-{uuid.uuid4().hex}"
    action = (
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'])\n"
        "os.kill(int(os.environ['LIBRARIAN_TEST_PID']), signal.SIGTERM)\n"
        "time.sleep(600)\n"
    )
    monkeypatch.setenv("LIBRARIAN_TEST_PID", str(os.getpid()))
    result = build(run, env, hostile_source(tmp_path, action))
    assert result.code == 143, result.err
    assert error_line(result).startswith("librarian: error: terminated (SIGTERM)")
    assert not (tmp_path / "wheelhouse").exists()
    assert not list((tmp_path / "tmp").glob("librarian-build-*"))
    assert not list((tmp_path / "tmp").glob("pip-*"))  # pip's own temporary folders: in the build folder
    assert nothing_left(marker)


def test_a_flood_of_output_is_capped_in_the_log_head_and_tail_kept(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """32 MiB on one line without a newline: the log keeps its cap (head and tail), and says so."""
    action = "sys.stdout.write('HEAD' + 'x' * (32 << 20) + 'TAIL'); sys.stdout.flush()\n"
    monkeypatch.setenv("LIBRARIAN_BUILD_LOG_MAX", str(1 << 20))
    result = build(run, env, hostile_source(tmp_path, action), "-o", "out")
    assert result.code == 0, result.err
    log = log_of(result)
    assert log.stat().st_size < (1 << 20) + 4096
    text = log.read_text(errors="replace")
    assert "bytes of output cut here" in text and "LIBRARIAN_BUILD_LOG_MAX=1048576" in text
    assert text.index("+ ") < text.index("bytes of output cut here")  # the head is the log's start


def test_the_log_cap_keeps_head_and_tail_exactly(tmp_path: Path) -> None:
    log = BuildLog(tmp_path / "b.log", cap=100)
    log.write("A" * 50)
    for _ in range(1000):
        log.write("m" * 7)
    log.write("Z" * 50)
    log.close()
    text = (tmp_path / "b.log").read_text()
    head, _, rest = text.partition("\n[librarian: ")
    assert head == "A" * 50 and rest.endswith("Z" * 50) and "7000 bytes of output cut here" in rest


def test_credentials_never_reach_the_screen_or_the_log_and_the_token_not_the_backend(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_buildmustnotseeme")
    seen = tmp_path / "seen.txt"
    action = f"open({str(seen)!r}, 'w').write(repr(os.environ.get('HF_TOKEN')))\n"
    ok = build(run, env, hostile_source(tmp_path, action), "-o", "out")
    assert ok.code == 0, ok.err
    assert seen.read_text() == "None"
    index = "https://farmer:s3cret-pass@127.0.0.1:9/simple"
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "cache2"))  # a new environment: torch is installed
    failed = run("build", str(hostile_source(tmp_path)), *COMBO, "--sm", "89", "--torch-index", index)
    assert failed.code in (1, 3), failed.err
    assert "s3cret-pass" not in failed.err + failed.out, failed.err
    assert "--index-url https://***@127.0.0.1:9/simple" in failed.err, failed.err
    logged = log_of(failed).read_text()
    assert "--index-url" in logged and "s3cret-pass" not in logged


@contextlib.contextmanager
def stalled_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for s in held:
            s.close()
        server.close()


def test_a_stalled_credentialed_source_url_times_out_in_one_line(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_SOURCE_TIMEOUT", "1")
    with stalled_server() as port:
        url = f"http://farmer:s3cret-pass@127.0.0.1:{port}/tinykern-0.1.0.tar.gz"
        started = time.monotonic()
        result = run("build", url, *COMBO, "--sm", "89", "--torch-index", str(env))
    assert time.monotonic() - started < 60
    assert result.code == 3, result.err
    line = error_line(result)
    assert "cannot download the source (no answer within 1 s" in line and "s3cret-pass" not in result.err
    assert "s3cret-pass" not in log_of(result).read_text()


# --- the source folder, the requirements, the leftovers ------------------------------------------------


def test_the_source_folder_is_copied_not_written(run: Run, tmp_path: Path, env: Path) -> None:
    src = hostile_source(tmp_path)
    (src / "build").mkdir()
    (src / "build" / "stale.txt").write_text("a stale build output a later build must not reuse")
    (src / ".git").mkdir()
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    result = build(run, env, src, "-o", "out")
    assert result.code == 0, result.err
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before  # nothing written in the user's tree
    assert "building a copy of" in result.err


def test_a_source_with_a_link_out_of_it_is_refused_in_one_line(run: Run, tmp_path: Path, env: Path) -> None:
    """Issue 54, item 6: a link to a secret file (or any file outside the source) would be copied as a link,
    and the backend read or write through it; a link inside the source is the source's own."""
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t")
    src = hostile_source(tmp_path, "print(open('data.txt').read())")
    (src / "data.txt").write_text("data")
    (src / "inner.txt").write_text("fine")
    (src / "inner-link.txt").symlink_to("inner.txt")  # stays inside: copied as it is
    assert build(run, env, src, "-o", "out").code == 0
    for target in (
        str(secret),
        f"../{secret.name}",
        str(src / "inner.txt"),
    ):  # an absolute link leaves the copy
        (src / "data.txt").unlink(missing_ok=True)
        (src / "data.txt").symlink_to(target)
        result = build(run, env, src, "-o", "out2")
        assert result.code == 2, result.err
        line = error_line(result)
        assert f"data.txt -> {target}: a symbolic link out of the source; a build sees only its copy" in line
        assert "s3cr3t" not in result.err + result.out and not (tmp_path / "out2").exists()


def test_sandbox_without_bubblewrap_is_one_line_before_anything_runs(
    run: Run, tmp_path: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "bwrap" else _which(name))
    result = build(run, env, hostile_source(tmp_path), "--sandbox", "-o", "out")
    assert result.code == 2 and "--sandbox: bubblewrap (bwrap) is not on PATH" in error_line(result)
    assert not (tmp_path / "out").exists()


_which = __import__("shutil").which


@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="bubblewrap (bwrap) is not on PATH")
def test_a_sandboxed_backend_writes_only_in_its_build_folder(run: Run, tmp_path: Path, env: Path) -> None:
    """Under --sandbox the backend's write outside its build folder fails (read-only file system), and
    nothing outside changes; the same source builds where it writes only its own."""
    outside = tmp_path / "outside.txt"
    outside.write_text("as it was")
    writes = f"open({str(outside)!r}, 'w').write('torn')\n"
    result = build(run, env, hostile_source(tmp_path, writes), "--sandbox", "-o", "out")
    assert result.code == 1, result.err
    assert "Read-only file system" in log_of(result).read_text() and outside.read_text() == "as it was"
    fine = build(
        run, env, hostile_source(tmp_path, "open('own.txt', 'w').write('mine')\n"), "--sandbox", "-o", "out"
    )
    assert fine.code == 0, fine.err
    assert "sandbox: " in fine.err and len(list((tmp_path / "out").glob("*.whl"))) == 1


def test_an_empty_requirement_list_with_ninja_on_path_installs_nothing(tmp_path: Path) -> None:
    from librarian.ops.build.build_env import Environment, run_install
    from librarian.ops.build.build_source import build_tools as tools_of

    (tmp_path / "pyproject.toml").write_text("[build-system]\nrequires = []\n")
    assert tools_of(str(tmp_path), ninja_on_path=True) == []
    log = BuildLog(tmp_path / "b.log")
    # an environment whose python does not exist: any command run would fail loudly
    run_install(Environment(tmp_path, tmp_path / "no-python", None), [], log, "the build tools", print)
    log.close()
    assert (tmp_path / "b.log").read_text() == ""


def test_a_killed_builds_folder_is_swept_by_the_next(run: Run, tmp_path: Path, env: Path) -> None:
    dead = tmp_path / "tmp" / "librarian-build-999999999-abcd"  # no process has that pid
    (dead / "dist").mkdir(parents=True)
    kept = tmp_path / "tmp" / "librarian-build-999999998-kept"
    kept.mkdir()
    (kept / ".librarian-kept").touch()  # --keep asked for it
    result = build(run, env, hostile_source(tmp_path), "-o", "out")
    assert result.code == 0, result.err
    assert not dead.exists() and kept.exists()


# --- the runner itself ----------------------------------------------------------------------------------


def test_a_silent_command_gets_a_heartbeat_and_a_long_line_is_bounded_and_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from librarian.ops.build.build_run import MAX_LINE, run_logged

    monkeypatch.setenv("LIBRARIAN_BUILD_HEARTBEAT", "1")
    script = (
        "import sys, time\n"
        "print('fetching https://farmer:s3cret-pass@host/simple', flush=True)\n"
        "sys.stdout.write('y' * 200000); sys.stdout.flush()\n"
        "time.sleep(2.5)\n"
        "print('done')\n"
    )
    beats: list[float] = []
    shown: list[str] = []
    log = BuildLog(tmp_path / "run.log")
    code, tail = run_logged([sys.executable, "-c", script], dict(os.environ), log, shown.append,
                            heartbeat=beats.append)  # fmt: skip
    log.close()
    assert code == 0 and beats and all(b >= 1 for b in beats)
    assert shown[0] == "fetching https://***@host/simple"
    assert len(shown[1]) <= MAX_LINE + len(" [...]") and shown[1].endswith("ydone") is False
    assert tail[-1].startswith("y") and tail[-1].endswith("[...]")
    text = (tmp_path / "run.log").read_text()
    assert "s3cret-pass" not in text and "y" * 200000 in text  # under the cap the log keeps it all
