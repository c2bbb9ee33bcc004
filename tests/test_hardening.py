"""Bad input that once cost a traceback, memory or a confusing name: one line each, bounded, naming the
user's file (the README's one-line errors, as regression tests)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from librarian.probe import target as probe
from librarian.probe.target import Target, probe_target
from tests.builders import make_wheel
from tests.conftest import Run


def one_line(err: str) -> str:
    assert err.startswith("librarian: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_deeply_nested_manifest_is_one_line(run: Run, tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    result = run("reindex", "--manifest", "deep.json", "--repo", str(tmp_path / "store"))
    assert result.code == 2
    assert "deep.json: not a stage manifest (JSON nested too deeply)" in one_line(result.err)


def test_a_manifest_past_the_limit_is_refused_unread(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("librarian.manifest.MAX_MANIFEST_BYTES", 1000)
    monkeypatch.setattr("librarian.ops.store.staged.MAX_MANIFEST_BYTES", 1000)
    (tmp_path / "big.json").write_text(json.dumps({"kind": "x", "pad": "y" * 5000}))
    result = run("reindex", "--manifest", "big.json", "--repo", str(tmp_path / "store"))
    assert result.code == 2 and "big.json: over the 0 MiB limit for a stage manifest" in one_line(result.err)


def fake_python(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "bin" / "python3"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f"#!{sys.executable}\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_an_interpreter_that_prints_without_end_costs_no_memory(tmp_path: Path) -> None:
    exe = fake_python(tmp_path, "import sys\nsys.stdout.write('x' * (2 << 20))")
    with pytest.raises(Exception, match=r"printed 2097152 bytes to librarian's probe") as e:
        probe_target(Target(exe, "--python"))
    assert "import" not in str(e.value)


def test_a_hanging_interpreter_is_named_not_the_probes_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "PROBE_TIMEOUT", 1)
    exe = fake_python(tmp_path, "import time\ntime.sleep(30)")
    with pytest.raises(Exception) as e:
        probe_target(Target(exe, "--python"))
    assert str(e.value) == f"{exe}: did not answer librarian's probe within 1 s"


def test_pull_requirements_into_a_directory_names_it(run: Run, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64")
    assert run("publish", str(wheel), "--sm", "89", "--torch", "2.8", "--cuda", "12.8").code == 0
    (tmp_path / "reqs").mkdir()
    result = run(
        "pull",
        "tinykern",
        "--sm",
        "89",
        "--torch",
        "2.8",
        "--python",
        "3.11",
        "--platform",
        "linux_x86_64",
        "--requirements",
        "reqs",
    )
    assert result.code == 2
    assert "reqs: is a directory; --requirements names the file to write" in one_line(result.err)
    assert ".tmp" not in result.err and os.listdir(tmp_path / "reqs") == []
