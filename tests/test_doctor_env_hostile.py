"""``doctor --env`` over a hostile site-packages (issue 54, item 2): every dist-info file opened as a regular
file with a size cap (a FIFO or a device named and skipped), RECORD's rows de-duplicated and capped, a
``top_level.txt`` line read as a name, names from the disk printed with control characters escaped, and
its forked workers killed with it.

Each case runs ``python -m librarian`` in its own process with a time-out: a hang fails the test instead
of stopping the suite. The environments are real venvs; the native files the nvcc fixtures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import test_doctor_env as base
from tests.test_doctor_env import MACHINE, install

# the fixtures of test_doctor_env, the same here: nvcc's libraries, no GPU probed, a real venv
sos, bare, venv = base.sos, base.bare, base.venv

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's")


def doctor(python: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """``librarian doctor --env`` of ``python`` in a process of its own, given a minute (it needs seconds)."""
    argv = [sys.executable, "-m", "librarian", "doctor", "--env", "--python", str(python), "--sm", "90"]
    return subprocess.run([*argv, *MACHINE, *more], capture_output=True, text=True, timeout=120, check=False)


def test_dist_info_files_that_are_fifos_or_devices_are_named_and_skipped(
    venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    python, site = venv
    install(site, "kern90", {"kern90/_C.so": sos["sm_90"].read_bytes()})
    for name, file in (("fifowheel", "WHEEL"), ("fifometa", "METADATA"), ("fiforecord", "RECORD")):
        install(site, name, {f"{name}/_C.so": sos["sm_90"].read_bytes()})
        (site / f"{name}-1.0.dist-info" / file).unlink()
        os.mkfifo(site / f"{name}-1.0.dist-info" / file)
    install(site, "zerowheel", {"zerowheel/_C.so": sos["sm_90"].read_bytes()})
    (site / "zerowheel-1.0.dist-info" / "WHEEL").unlink()
    (site / "zerowheel-1.0.dist-info" / "WHEEL").symlink_to("/dev/zero")
    install(site, "fifotops", {"fifotops/_C.so": sos["sm_90"].read_bytes()}, record=False)
    os.mkfifo(site / "fifotops-1.0.dist-info" / "top_level.txt")
    install(site, "zerotops", {"zerotops/_C.so": sos["sm_90"].read_bytes()}, record=False)
    (site / "zerotops-1.0.dist-info" / "top_level.txt").symlink_to("/dev/zero")
    install(site, "bigwheel", {"bigwheel/_C.so": sos["sm_90"].read_bytes()})
    with (site / "bigwheel-1.0.dist-info" / "WHEEL").open("r+b") as f:
        f.truncate(1 << 30)  # a sparse 1 GiB WHEEL: refused by its size, not read

    result = doctor(python)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr == ""
    out = result.stdout
    assert "  kern90 1.0: runs" in out.splitlines()
    for line in (
        "      WHEEL: a FIFO, not a regular file; skipped",
        "      METADATA: a FIFO, not a regular file; skipped",
        "  fiforecord 1.0: not judged: RECORD: a FIFO, not a regular file; skipped",
        "      WHEEL: a device, not a regular file; skipped",
        "      top_level.txt: a FIFO, not a regular file; skipped",
        "      top_level.txt: a device, not a regular file; skipped",
    ):
        assert line in out.splitlines(), out
    assert "WHEEL: 1073741824 bytes, over the 1048576-byte limit; not read" in out
    # the files that could not be read are skipped; the libraries are still judged (found by the
    # package's own name where top_level.txt could not be read)
    for name in ("fifowheel", "fifometa", "zerowheel", "bigwheel", "fifotops", "zerotops"):
        assert f"  {name} 1.0: runs" in out.splitlines(), out


def test_record_rows_are_read_once_each_and_capped(venv: tuple[Path, Path], sos: dict[str, Path]) -> None:
    python, site = venv
    install(site, "repeats", {"repeats/_C.so": sos["sm_90"].read_bytes()})
    record = site / "repeats-1.0.dist-info" / "RECORD"
    row = record.read_text().splitlines()[0]
    record.write_text((row + "\n") * 200_000)  # one library named 200,000 times: read once
    install(site, "missing", {"missing/_C.so": sos["sm_90"].read_bytes()})
    (site / "missing-1.0.dist-info" / "RECORD").write_text(
        "".join(f"missing/gone{k}.so,,\n" for k in range(5_000)) + "missing/_C.so,,\n"
    )
    install(site, "endless", {"endless/_C.so": sos["sm_90"].read_bytes()})
    (site / "endless-1.0.dist-info" / "RECORD").write_text("".join(f"x/f{k}.py,,\n" for k in range(600_000)))
    install(site, "wide", {"wide/_C.so": sos["sm_90"].read_bytes()})
    (site / "wide-1.0.dist-info" / "RECORD").write_text("".join(f"w/m{k}.so,,\n" for k in range(25_000)))

    result = doctor(python)  # within doctor()'s time-out, far above what it needs

    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    out = result.stdout.splitlines()
    assert "  repeats 1.0: runs" in out
    assert "  missing 1.0: runs" in out  # its one library is there; the missing ones are named, then counted
    assert "      missing/gone0.so: in RECORD but not installed (half-installed?)" in out
    assert "      and 4980 more" in out and sum("gone" in line for line in out) == 20
    assert "  endless 1.0: not judged: RECORD: over 500000 rows: not judged" in out
    assert "  wide 1.0: not judged: RECORD: over 20000 native files: not judged" in out


def test_a_top_level_line_is_a_name_never_a_pattern(venv: tuple[Path, Path], sos: dict[str, Path]) -> None:
    python, site = venv
    install(site, "globby", {"globby/_C.so": sos["sm_90"].read_bytes()}, record=False)
    (site / "globby-1.0.dist-info" / "top_level.txt").write_text("**\n../..\n/etc\nglobby\n")
    install(site, "kern90", {"kern90/_C.so": sos["sm_90"].read_bytes()})

    result = doctor(python)

    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    out = result.stdout.splitlines()
    assert "  globby 1.0: runs" in out and "  kern90 1.0: runs" in out


def test_names_from_the_disk_are_printed_with_control_characters_escaped(
    venv: tuple[Path, Path], sos: dict[str, Path]
) -> None:
    python, site = venv
    evil = "evil\x1b]0;pwned\x07\x1b[2J"
    install(site, evil, {"evil/_C\x1b[31m.so": sos["sm_80"].read_bytes()})

    result = doctor(python)

    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    # named as its folder is, escaped (and not judged: no distribution is named so)
    assert r"  evil\x1b]0;pwned\x07\x1b[2J 1.0: not judged: " in result.stdout, result.stdout
    assert result.returncode == 0 and result.stderr == ""


def test_a_killed_doctor_leaves_no_worker_behind(tmp_path: Path) -> None:
    """The pool of forked readers, its parent killed with SIGKILL (no handler runs): the workers go too."""
    pids = tmp_path / "pids"
    pids.mkdir()
    script = textwrap.dedent(
        f"""
        import os, time
        from librarian.pool import processes_largest_first

        def work(item):
            open(os.path.join({str(pids)!r}, str(os.getpid())), "w").close()
            time.sleep(300)
            return item

        processes_largest_first(work, [1, 2, 3], [1, 1, 1], 3)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = [int(p.name) for p in pids.iterdir()]
        assert len(workers) == 3
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _alive(pid)]


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by init, is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
