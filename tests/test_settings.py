"""README promises about settings and flags that only a run from the command line shows:
``LIBRARIAN_HUB_CONNECT_TIMEOUT``, ``LIBRARIAN_HUB_RETRIES``, ``LIBRARIAN_LOG`` and ``gc --older-than``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import make_wheel, torch_extension_so
from tests.conftest import Run
from tests.loophub.fixtures import point_client_at
from tests.loophub.server import LoopHub

REPO = "hf://datasets/team/wheels"


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A loopback address whose connections never complete: a listener that accepts none, its one-slot
    queue already taken, so the kernel drops every further handshake (a firewall that drops, not rejects)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filler = [socket.create_connection(listener.getsockname(), timeout=10)]  # takes the one slot
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    for s in (*filler, listener):
        s.close()


def test_the_connect_time_out_is_a_setting(
    run: Run, blackhole: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_client_at(blackhole, tmp_path / "home", monkeypatch, client_timeout=60.0)
    monkeypatch.setenv("LIBRARIAN_HUB_CONNECT_TIMEOUT", "0.2")
    monkeypatch.setenv("LIBRARIAN_HUB_RETRIES", "3")
    monkeypatch.setenv("LIBRARIAN_HUB_RETRY_BUDGET", "300")
    start = time.monotonic()
    result = run("ls", "--repo", REPO)
    # Four tries of 0.2 s each; with the default 10 s they would take 40 s. The bound is far above the former.
    assert time.monotonic() - start < 30
    assert result.code == 3, result.err
    assert "cannot reach the Hub (ConnectTimeout, also after retries)" in result.err
    assert result.err.count("\n") == 1, result.err


def test_the_number_of_retries_is_a_setting(
    run: Run, loophub: LoopHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    published = run("publish", str(wheel), "--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--trust-sm",
                    "--repo", REPO, "--create")  # fmt: skip
    assert published.code == 0, published.err
    monkeypatch.setenv("LIBRARIAN_CACHE", str(tmp_path / "no-cache"))  # nothing cached to fall back to
    monkeypatch.setenv("LIBRARIAN_HUB_RETRIES", "1")
    loophub.fail("repo_info", times=2)
    before = loophub.log.count("repo_info")
    result = run("ls", "--repo", REPO)
    assert result.code == 3, result.err
    assert "503" in result.err
    assert loophub.log.count("repo_info") - before == 2  # the try and one retry
    monkeypatch.setenv("LIBRARIAN_HUB_RETRIES", "2")
    loophub.fail("repo_info", times=2)
    assert run("ls", "--repo", REPO).code == 0  # a third try gets through


def test_librarian_log_sets_the_level_as_v_does(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    args = (
        "publish",
        str(wheel),
        "--sm",
        "89",
        "--torch",
        "2.8",
        "--cuda",
        "12.8",
        "--trust-sm",
        "--dry-run",
    )
    quiet = run(*args)
    verbose = run("-v", *args)
    monkeypatch.setenv("LIBRARIAN_LOG", "INFO")
    by_setting = run(*args)
    assert quiet.code == verbose.code == by_setting.code == 0
    said = set(verbose.err.splitlines()) - set(quiet.err.splitlines())
    assert said, verbose.err  # -v says more than the default
    assert said <= set(by_setting.err.splitlines()), by_setting.err


def test_gc_older_than_from_the_command_line(run: Run, tmp_path: Path) -> None:
    for version in ("0.1.0", "0.2.0"):
        wheel = make_wheel(tmp_path / "dist", "tinykern", version, "cp311-cp311-linux_x86_64",
                           {"tinykern/_C.so": torch_extension_so(version.encode())})  # fmt: skip
        published = run("publish", str(wheel), "--sm", "89", "--torch", "2.8", "--cuda", "12.8", "--trust-sm")
        assert published.code == 0, published.err
    young = run("gc", "--older-than", "30")
    assert young.code == 0 and "older than" not in young.out, young.out
    plan = run("gc", "--older-than", "0")
    assert plan.code == 0 and plan.out.count("older than 0 days") == 1, plan.out  # the cell's last one stays
    done = run("gc", "--older-than", "0", "--yes")
    assert done.code == 0, done.err
    assert len(list((tmp_path / "wheelhouse" / "tinykern").rglob("*.whl"))) == 1
