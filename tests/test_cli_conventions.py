"""The command line's conventions, as a new user meets them: --version, completion, -q/-v, --json, bars."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import librarian
from tests.builders import make_wheel
from tests.conftest import Result, Run
from tests.cuda_fixtures import cubin_bytes, fatbin_blob, fatbin_entry, so_with_fatbin
from tests.loophub.server import LoopHub

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"
SAMPLE = "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
LABEL = ("--torch", "2.9", "--cuda", "13.0")
MACHINE = ("--sm", "89", "--torch", "2.9", "--python", "3.12")


def librarian_cli(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, as a shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "librarian", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


@pytest.fixture
def store(run: Run, tmp_path: Path) -> Path:
    """The three sample wheels published into ./wheelhouse (each hard-linked under sm80, sm86, sm89, sm90)."""
    shutil.copytree(SAMPLES, tmp_path / "dist")
    assert run("publish", *map(str, sorted((tmp_path / "dist").glob("*.whl"))), *LABEL).code == 0
    return tmp_path / "wheelhouse"


def test_version(run: Run) -> None:
    result = run("--version")
    assert result.code == 0 and result.out == f"librarian {librarian.__version__}\n"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(tmp_path: Path, shell: str) -> None:
    # typer's own switch for naming the shell instead of detecting the one that runs us
    env = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    result = librarian_cli("--show-completion", shell, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "_LIBRARIAN_COMPLETE" in result.stdout and f"complete_{shell}" in result.stdout


def test_completion_completes_commands_and_flags(tmp_path: Path) -> None:
    env = {"_LIBRARIAN_COMPLETE": "complete_bash", "COMP_WORDS": "librarian pu", "COMP_CWORD": "1"}
    assert set(librarian_cli(cwd=tmp_path, env=env).stdout.split()) == {"publish", "pull"}
    env = {
        "_LIBRARIAN_COMPLETE": "complete_bash",
        "COMP_WORDS": "librarian publish --allow-g",
        "COMP_CWORD": "2",
    }
    assert librarian_cli(cwd=tmp_path, env=env).stdout.split() == ["--allow-glibc-mismatch"]


def test_help_keeps_brackets() -> None:
    result = librarian_cli("publish", "--help", cwd=Path.cwd())
    assert "hf://datasets/OWNER/NAME[@REV]" in " ".join(result.stdout.split())


def test_quiet_and_verbose(run: Run, store: Path, tmp_path: Path) -> None:
    wheel = str(tmp_path / "dist" / SAMPLE)
    loud = run("-v", "publish", wheel, *LABEL, "--replace")
    assert loud.code == 0 and "librarian: published to wheelhouse" in loud.err
    debug = run("-vv", "retag", wheel, *LABEL, "-o", "labelled", "--force")
    assert "deprecated" in debug.err
    quiet = run("-q", "retag", wheel, "--torch", "2.8", "--cuda", "12.8", "-o", "labelled2", "--force")
    assert quiet.code == 0 and quiet.err == "" and quiet.out.strip().endswith(".whl")
    assert run("-q", "verify").err == ""
    # after the command too, as pip and uv take them; a "--" ends the options
    late = run("retag", wheel, "--torch", "2.7", "--cuda", "12.8", "-o", "labelled3", "--force", "-q")
    assert late.code == 0 and late.err == ""
    assert "published to" in run("publish", wheel, *LABEL, "--replace", "-v").err
    # -v for inspect: more detail (each member), wherever it is
    assert run("inspect", wheel, "-v").out == run("-v", "inspect", wheel).out != run("inspect", wheel).out


def parsed(result: Result, code: int) -> dict[str, object]:
    assert result.code == code, result
    data = json.loads(result.out)  # exactly one JSON document on stdout, whatever happened
    # each report's schema: 1, but ls's 2 (each wheel once, facts once per sha256)
    assert isinstance(data, dict) and data.get("schema", 1) in (1, 2)
    return data


def test_every_command_answers_json(
    run: Run, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "LIBRARIAN_MATRIX", str(tmp_path / "matrix.toml")
    )  # refresh writes here, not ~/.config
    wheel = str(tmp_path / "dist" / SAMPLE)
    page = tmp_path / "torch.html"
    page.write_text('<a href="torch-2.9.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl">x</a>\n')
    done = {
        "retag": parsed(run("retag", wheel, *LABEL, "-o", "out", "--json"), 0)["wheels"],
        "inspect": parsed(run("inspect", "dist", "--json"), 0)["files"],
        "doctor": parsed(run("doctor", wheel, *MACHINE, "--cuda", "13.0", "--json"), 0)["wheels"],
        "publish": parsed(run("publish", wheel, *LABEL, "--json"), 0)["filings"],
        "reindex": parsed(run("reindex", "--json"), 0),
        "verify": parsed(run("verify", "--deep", "--json"), 0)["ok"],
        "ls": parsed(run("ls", "--json"), 0),
        "pull": parsed(run("pull", "tinykern", *MACHINE, "-o", "pulled", "--json"), 0)["wheels"],
        "gc": parsed(run("gc", "--drop-torch", "2.9", "--json"), 0)["remove"],
        "matrix": parsed(run("matrix", "--torch", "2.9", "--json"), 0),
        "matrix refresh": parsed(run("matrix", "refresh", "--from", str(page), "--json"), 0)["served"],
    }
    assert all(done.values()), done
    failures = {
        "retag": run("retag", "nothere.whl", *LABEL, "--json"),
        "inspect": run("inspect", "nothere.whl", "--json"),
        "doctor": run("doctor", "nothere.whl", "--json"),
        "publish": run("publish", wheel, "--torch", "2.4", "--cuda", "12.9", "--json"),
        "reindex": run("reindex", "--repo", "nostore", "--json"),
        "verify": run("verify", "--repo", "nostore", "--json"),
        "ls": run("ls", "--repo", "nostore", "--json"),
        "gc": run("gc", "--json"),
        "matrix": run("matrix", "--torch", "banana", "--json"),
        "matrix refresh": run("matrix", "refresh", "--from", str(tmp_path / "none.html"), "--json"),
        "usage": run("publish", "--no-such-flag", "--json"),
    }
    for command, result in failures.items():
        data = parsed(result, 2)
        assert data["exit"] == 2 and isinstance(data["error"], str) and data["error"], command
        assert result.err.startswith(f"librarian: error: {data['error']}"), command
    # a finding: pull with no match still answers one JSON document, with the reasons
    miss = parsed(run("pull", "tinykern", "--sm", "75", "--torch", "2.9", "--python", "3.12", "--json"), 1)
    assert miss["exit"] == 1 and "sm75" in str(miss["error"]) and miss["details"]


def test_inspect_and_doctor_take_directories(run: Run, store: Path, tmp_path: Path) -> None:
    inspected = json.loads(run("inspect", "dist", "--json").out)["files"]
    assert sorted(Path(f["file"]).name for f in inspected) == sorted(p.name for p in SAMPLES.glob("*.whl"))
    judged = run("doctor", "dist", *MACHINE, "--cuda", "13.0", "--json")
    assert len(json.loads(judged.out)["wheels"]) == 3 and judged.code == 1  # only cp312 runs on Python 3.12
    (tmp_path / "empty").mkdir()
    assert "empty: a directory with no .whl file inside" in run("inspect", "empty").err


def test_verify_deep_reads_each_blob_once(run: Run, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from librarian.wheel import OpenedWheel

    reads: list[Path] = []
    real = OpenedWheel.deep
    monkeypatch.setattr(OpenedWheel, "deep", lambda w, *a, **kw: reads.append(w.path) or real(w, *a, **kw))
    assert run("verify", "--deep").code == 0
    assert len(reads) == 3  # three wheels, each hard-linked under four cells
    # A problem in the bytes is reported once, naming every path the bytes are filed under.
    paths = sorted(
        str(p.relative_to(store)) for p in store.rglob(SAMPLE.replace("0.1.0", "0.1.0+cu130torch2.9"))
    )
    assert len(paths) == 4
    target = store / paths[0]
    with zipfile.ZipFile(target) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    name = next(n for n in members if n.endswith(".dist-info/METADATA"))
    members[name] = members[name].replace(b"Version: 0.1.0+cu130torch2.9", b"Version: 0.2.0+cu130torch2.9")
    rewritten = target.with_name("rewritten.zip")
    with zipfile.ZipFile(rewritten, "w") as zf:
        for member, content in members.items():
            zf.writestr(member, content)
    with target.open("r+b") as f:  # in place: every hard link sees the new bytes
        f.write(rewritten.read_bytes())
        f.truncate()
    rewritten.unlink()
    result = run("verify", "--json")
    problems = [p for p in json.loads(result.out)["problems"] if "0.2.0" in p["problem"]]
    assert len(problems) == 1 and [problems[0]["path"], *problems[0]["also"]] == paths, problems
    text = run("verify").out
    assert (
        f"{paths[0]} (and {len(paths) - 1} other paths with the same bytes): " in text
    )  # a count: lines stay short
    # Read on threads or not, the report is the same, in the same order.
    deep = [run("verify", "--deep", "-j", jobs) for jobs in ("1", "3")]
    assert deep[0].code == deep[1].code == 1 and deep[0].out == deep[1].out
    as_json = [run("verify", "--deep", "--json", "-j", jobs).out for jobs in ("1", "4")]
    assert as_json[0] == as_json[1] and "0.2.0" in as_json[0]


def on_pty(argv: list[str], cwd: Path) -> tuple[int, str, bytes]:
    """Run with stderr on a pseudo-terminal (as a person at a terminal sees it); stdout piped."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "librarian", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen.append(chunk)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    os.close(master)
    return proc.wait(timeout=120), out, b"".join(seen)


@pytest.mark.slow
def test_progress_bars_on_a_terminal_only(tmp_path: Path) -> None:
    big = make_wheel(
        tmp_path / "dist",
        "bigkern",
        "0.1.0",
        "cp311-cp311-linux_x86_64",
        {"bigkern/blob.bin": bytes(200 << 20)},
        compression=zipfile.ZIP_STORED,
    )
    code, out, err = on_pty(["retag", str(big), *LABEL, "-o", "out"], tmp_path)
    assert code == 0 and out.strip().endswith("+cu130torch2.9-cp311-cp311-linux_x86_64.whl")
    assert b"retag bigkern" in err and b"/209.7 MB" in err and "━".encode() in err
    piped = librarian_cli("retag", str(big), *LABEL, "-o", "out2", cwd=tmp_path)
    assert piped.returncode == 0 and piped.stderr == ""
    quiet = on_pty(["-q", "retag", str(big), *LABEL, "-o", "out3"], tmp_path)
    assert quiet[0] == 0 and quiet[2] == b""
    samples = [str(p) for p in sorted(SAMPLES.glob("*.whl"))]
    code, out, err = on_pty(["publish", *samples, *LABEL], tmp_path)
    assert code == 0 and b"publish" in err and b"/3" in err and b"wheels" in err
    piped = librarian_cli("publish", *samples, *LABEL, "--repo", "other", cwd=tmp_path)
    assert piped.returncode == 0 and piped.stderr == ""
    code, out, err = on_pty(["publish", *samples, *LABEL, "--repo", "third", "--json"], tmp_path)
    assert code == 0 and err == b"" and json.loads(out)["filings"]


@pytest.mark.slow
def test_hub_transfers_show_our_bars(loophub: LoopHub, tmp_path: Path) -> None:
    big = make_wheel(
        tmp_path / "dist",
        "bigkern",
        "0.1.0",
        "cp311-cp311-linux_x86_64",
        {"bigkern/blob.bin": bytes(40 << 20)},
        compression=zipfile.ZIP_STORED,
    )
    repo = ("--repo", "hf://datasets/team/wheels")
    code, _, err = on_pty(
        ["publish", str(big), "--torch", "2.8", "--cuda", "12.8", "--sm", "89", *repo, "--create"], tmp_path
    )
    assert code == 0 and re.search(rb"commit \d+ file\(s\)", err), err[-500:]
    want = (
        "bigkern",
        "--sm",
        "89",
        "--torch",
        "2.8",
        "--python",
        "3.11",
        "--platform",
        "linux_x86_64",
        *repo,
    )
    code, _, err = on_pty(["pull", *want, "-o", "got"], tmp_path)
    assert code == 0 and b"download bigkern" in err and b"/41.9 MB" in err, err[-500:]
    piped = librarian_cli("pull", *want, "-o", "got2", cwd=tmp_path)
    # No bars when piped: only the one line saying the Hub is not huggingface.co.
    assert (
        piped.returncode == 0
        and piped.stderr == f"librarian: the Hub here is {loophub.url} (HF_ENDPOINT), not huggingface.co\n"
    )


def test_each_refusal_names_the_one_flag_that_overrides_it(run: Run, tmp_path: Path) -> None:
    # an aarch64 .so in an x86_64 wheel: the platform tag lies
    arm = so_with_fatbin(fatbin_blob(fatbin_entry(2, 89, cubin_bytes(89, release="13.0"))), machine=183)
    files = {"armkern/__init__.py": b"", "armkern/_C.so": arm}
    whl = make_wheel(tmp_path / "dist", "armkern", "1.0", "cp312-cp312-linux_x86_64", files)
    refused = run("publish", str(whl), *LABEL)
    assert refused.code == 2 and "platform linux_x86_64, but armkern/_C.so is aarch64" in refused.err
    assert "pass --allow-platform-mismatch to publish it anyway" in refused.err
    for other in ("--allow-glibc-mismatch", "--allow-cuda-mismatch", "--trust-sm", "--relabel"):
        assert run("publish", str(whl), *LABEL, other).code == 2, other  # each overrides its own thing only
    assert run("publish", str(whl), *LABEL, "--allow-platform-mismatch").code == 0
    # the old --force still accepts it, and says it is deprecated
    old = run("publish", str(whl), *LABEL, "--force", "--repo", "other")
    assert old.code == 0 and "publish --force is deprecated" in old.err
    # a wheel that carries another label: --relabel, on publish as on retag
    labelled = run("retag", str(whl), "--torch", "2.8", "--cuda", "12.8", "-o", "labelled").out.strip()
    relabel = run("publish", labelled, *LABEL, "--allow-platform-mismatch")
    assert relabel.code == 2 and "pass --relabel" in relabel.err
    assert run("publish", labelled, *LABEL, "--allow-platform-mismatch", "--relabel").code == 0


def test_shared_flags_say_the_same_in_every_command() -> None:
    """A flag that means one thing is declared once: ``--github`` and ``--split`` read the same in matrix
    and plan, and pull's ``--sm`` (one GPU) is doctor's."""
    import typer.main

    from librarian.cli.app import app

    group = typer.main.get_command(app)
    ctx = group.make_context("librarian", ["--help"], resilient_parsing=True)

    def helps(*path: str) -> dict[str, str]:
        command = group
        for name in path:
            command = command.get_command(ctx, name)  # type: ignore[attr-defined]
        return {o: p.help or "" for p in command.params for o in p.opts if o.startswith("--")}

    matrix, plan = helps("matrix"), helps("plan")
    for flag in ("--github", "--split"):
        assert matrix[flag] == plan[flag], flag
    assert helps("pull")["--sm"] == helps("doctor")["--sm"]
