"""The grid (issue 55): builds record what they were made from and with, failed builds are remembered and left
out of the plan until something changes, and plan's jobs carry estimates and fit a budget.

The builds here compile nothing (the hostile-source harness: a setuptools project, nvcc a stand-in of the
combo's release, pip offline); a failing one fails as a compiler would, with the compiler's line in its log.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from librarian.build_failure import parse_failure
from librarian.build_record import BuildRecord, Source, clean_url
from librarian.config import load_settings
from librarian.errors import BadInput
from librarian.ops.build.build_env import compile_cache_folder
from librarian.ops.build.build_facts import first_error, tree_digest
from librarian.ops.grid.plan_budget import parse_budget
from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub
from tests.test_build import PYTHON, build_tools  # noqa: F401 (a fixture)
from tests.test_build_hostile import env, error_line, hostile_source, job, shared_cache  # noqa: F401 (fixtures)

FAILS = "sys.stderr.write('kern.cu(5): error: expected a declaration\\n'); sys.exit(1)"
RECORD = "wheelhouse/failures/tinykern/0.1.0/cp{}-torch2.9-cu130-linux-x86_64-sm89.json".format(
    PYTHON.replace(".", "")
)
HUB, REPO_ID = "hf://datasets/team/wheels", "team/wheels"
PLAN = ("plan", "tinykern==0.1.0", "--torch", "2.9", "--cuda", "13.0", "--python", PYTHON)


def _plan(run: Run, *argv: str) -> dict[str, object]:
    result = run(*PLAN, "--sm", "89", *argv, "--json")
    assert result.code == 0, result.err
    data: dict[str, object] = json.loads(result.out)
    return data


def test_a_failed_build_is_recorded_and_plan_leaves_its_cells_out_until_asked_or_changed(
    run: Run,
    tmp_path: Path,
    env: Path,  # noqa: F811
) -> None:
    bad = hostile_source(tmp_path, FAILS)
    failed = run("build", str(bad), "--job", job(), "--torch-index", str(env))
    assert failed.code == 1, failed.err
    assert "the build failed" in error_line(failed)
    assert f"recorded the failure in {RECORD}: plan leaves these cells out" in failed.err
    record = parse_failure((tmp_path / RECORD).read_bytes(), RECORD.removeprefix("wheelhouse/"))
    assert record.step == "compile" and record.error == "kern.cu(5): error: expected a declaration"
    assert record.source == Source("folder", bad.name, tree_digest(bad))
    assert record.toolchain.nvcc.startswith("13.0") and record.cells.sms == ("89",)
    assert "torch==2.9.*" in record.recipe

    plan = _plan(run)
    assert plan["jobs"] == []
    (left_out,) = plan["failed"]  # type: ignore[misc]
    assert "kern.cu(5): error: expected a declaration" in left_out["why"]
    human = run(*PLAN, "--sm", "89")
    assert "failed (1 cell(s): sm89;" in human.out and "--retry-failed" in human.out
    assert len(_plan(run, "--retry-failed")["jobs"]) == 1  # type: ignore[arg-type]
    assert _plan(run, "--source", str(bad))["jobs"] == []  # the same source: still failed
    fixed = hostile_source(tmp_path)
    assert len(_plan(run, "--source", str(fixed))["jobs"]) == 1  # type: ignore[arg-type]

    checked = run("verify")
    assert checked.code == 0, checked.out
    assert "a failed build, recorded" in checked.out and "kern.cu(5)" in checked.out
    # a record that is not one, and one that says other cells than its path: named by verify, never believed
    folder = tmp_path / RECORD
    (folder.parent / "junk.json").write_text("{not json")
    moved = folder.parent / f"cp{PYTHON.replace('.', '')}-torch2.9-cu130-linux-x86_64-sm80.json"
    moved.write_bytes(folder.read_bytes())
    folder.unlink()
    checked = run("verify")
    assert checked.code == 1
    assert "junk.json: not a failure record (" in checked.out
    assert f"{moved.name}: not a failure record (its cells' path is " in checked.out
    assert len(_plan(run)["jobs"]) == 1  # type: ignore[arg-type]


def test_a_built_wheel_records_its_source_toolchain_seconds_and_runner(
    run: Run,
    tmp_path: Path,
    env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = hostile_source(tmp_path)
    for key, value in {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "team/farm", "GITHUB_RUN_ID": "42",
                       "GITHUB_SERVER_URL": "https://someone:s3cret@github.example"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    built = run("build", str(src), "--job", job(), "--torch-index", str(env), "--json")
    assert built.code == 0, built.err
    assert "s3cret" not in built.out + built.err
    listed = run("ls", "--json")
    (wheel,) = json.loads(listed.out)["wheels"]
    record = BuildRecord.from_json(wheel["build"])
    assert record.source == Source("folder", src.name, tree_digest(src))
    assert record.toolchain.nvcc.startswith("13.0") and record.toolchain.torch.startswith("2.9.0")
    assert record.toolchain.cuda == "13.0" and record.archs == 1 and record.seconds >= 0
    assert record.runner == "https://github.example/team/farm/actions/runs/42"
    assert json.loads(built.out)["build"] == wheel["build"]
    shard = json.loads((tmp_path / "wheelhouse" / "index" / "tinykern.json").read_text())
    assert shard["schema"] == 4
    verified = run("verify")
    assert verified.code == 0 and "1 wheel(s) record their build (1 source(s)" in verified.out
    (listed_build,) = json.loads(run("verify", "--json").out)["builds"]
    assert listed_build == {"path": wheel["path"], "build": wheel["build"]}

    # held, from this source: nothing to do; from another: said, and planned again when asked
    assert _plan(run, "--source", str(src))["jobs"] == []
    other = hostile_source(tmp_path)
    (other / "hostile_mod.py").write_text("X = 2\n")
    plan = _plan(run, "--source", str(other))
    assert plan["jobs"] == [] and len(plan["other_source"]) == 1  # type: ignore[arg-type]
    human = run(*PLAN, "--sm", "89", "--source", str(other))
    assert "built from another source (1 cell(s)): folder " in human.out
    again = _plan(run, "--source", str(other), "--rebuild-other-source")
    (rebuild,) = again["jobs"]  # type: ignore[misc]
    assert rebuild["cells"] == ["sm89"] and rebuild["estimate-basis"] == "recorded"
    monkeypatch.delenv("GITHUB_ACTIONS")
    from librarian.ops.build.build_facts import runner_of

    assert runner_of() == socket.gethostname()[:200]


def test_plan_estimates_each_job_and_cuts_a_combo_to_fit_the_budget(run: Run, tmp_path: Path) -> None:
    sms = ("--sm", "75", "--sm", "80", "--sm", "86", "--sm", "89", "--sm", "90")
    whole = json.loads(run(*PLAN, *sms, "--json").out)
    (job_,) = whole["jobs"]
    assert job_["estimate-seconds"] == 300 + 5 * 1200 and job_["estimate-basis"] == "default"
    packed = json.loads(run(*PLAN, *sms, "--budget", "1h", "--github").out)["include"]
    assert [j["cells"] for j in packed] == [["sm75", "sm80"], ["sm86", "sm89"], ["sm90"]]
    assert all(j["estimate-seconds"] <= 3600 and j["torch"] == "2.9" for j in packed)
    assert [j["TORCH_CUDA_ARCH_LIST"] for j in packed] == ["7.5;8.0", "8.6;8.9", "9.0"]
    human = run(*PLAN, *sms, "--budget", "1h")
    assert "~1h45m" not in human.out and "~45m" in human.out
    small = run(*PLAN, *sms, "--budget", "10m")
    assert small.code == 2
    assert error_line(small) == (
        f"librarian: error: --budget: tinykern 0.1.0 sm75 for torch 2.9 CUDA 13.0 cp{PYTHON.replace('.', '')} "
        "linux-x86_64 is estimated at 1500 s (default), past the budget of 600 s"
    )
    assert run(*PLAN, *sms, "--budget", "soon").code == 2


def test_budget_words_and_compile_cache_settings() -> None:
    assert parse_budget("5h30m") == 19800 and parse_budget("90m") == 5400 and parse_budget("3600") == 3600
    for bad in ("", "0", "5x", "h", "-1h"):
        with pytest.raises(BadInput):
            parse_budget(bad)
    home = {"LIBRARIAN_CACHE": "/c"}
    assert compile_cache_folder(None, False, None, home) == Path("/c/ccache")  # on by default
    assert compile_cache_folder(None, True, None, home) is None
    assert compile_cache_folder(Path("/x"), False, False, home) == Path("/x")
    assert compile_cache_folder(None, False, False, home) is None
    assert compile_cache_folder(None, False, "/cfg", home) == Path("/cfg")
    assert compile_cache_folder(None, False, "/cfg", {**home, "LIBRARIAN_BUILD_CACHE": "off"}) is None
    assert compile_cache_folder(None, False, None, {**home, "LIBRARIAN_BUILD_CACHE": "/e"}) == Path("/e")


def test_build_cache_setting_in_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.librarian]\nbuild-cache = false\n")
    assert load_settings(cwd=tmp_path).build_cache is False
    (tmp_path / "pyproject.toml").write_text('[tool.librarian]\nbuild-cache = "/srv/ccache"\n')
    assert load_settings(cwd=tmp_path).build_cache == "/srv/ccache"
    (tmp_path / "pyproject.toml").write_text("[tool.librarian]\nbuild-cache = true\n")
    with pytest.raises(BadInput, match="build-cache"):
        load_settings(cwd=tmp_path)


def test_records_keep_no_credentials_and_refuse_what_they_are_not(tmp_path: Path) -> None:
    assert clean_url("https://user:tok@host:8443/a/b.tar.gz?sig=s3cret#x") == "https://host:8443/a/b.tar.gz"
    base = {
        "source": {"kind": "sdist", "name": "x.tar.gz", "sha256": "a" * 64},
        "toolchain": {},
        "seconds": 5,
    }
    assert BuildRecord.from_json(base).source.describe() == f"sdist x.tar.gz (sha256 {'a' * 12})"
    for broken in (
        {**base, "seconds": -1},
        {**base, "seconds": True},
        {**base, "source": {"kind": "folder", "name": "x"}},  # a folder without its digest
        {**base, "source": {"kind": "wish", "name": "x", "sha256": "a" * 64}},
        {**base, "source": {"kind": "sdist", "name": "x", "sha256": "Z" * 64}},
        {**base, "runner": "r" * 600},
    ):
        with pytest.raises((ValueError, TypeError)):
            BuildRecord.from_json(broken)
    log = tmp_path / "build.log"
    log.write_text(
        '  building\n  x.cu(12): error: identifier "y" is undefined\n  error: subprocess-exited-with-error\n'
    )
    assert first_error(log) == 'x.cu(12): error: identifier "y" is undefined'
    log.write_text("  error: subprocess-exited-with-error\n  note: This error originates from a subprocess\n")
    assert first_error(log) == ""


def test_on_the_hub_a_failure_is_one_commit_plan_reads_it_and_the_card_lists_it(
    run: Run,
    tmp_path: Path,
    env: Path,  # noqa: F811
    loophub: LoopHub,
) -> None:
    # another package's wheel makes the repo: a tinykern wheel without device code would hold every GPU
    make_wheel(tmp_path / "dist", "otherkern", "0.1.0", files={"otherkern/__init__.py": b""})
    wheel = "dist/otherkern-0.1.0-cp311-cp311-linux_x86_64.whl"
    first = run("publish", wheel, "--sm", "80", "--torch", "2.9", "--cuda", "13.0", "--repo", HUB, "--create")
    assert first.code == 0, first.err
    commits = loophub.commits_made(REPO_ID)
    bad = hostile_source(tmp_path, FAILS)
    failed = run("build", str(bad), "--job", job(), "--torch-index", str(env), "--repo", HUB)
    assert failed.code == 1, failed.err
    assert loophub.commits_made(REPO_ID) == commits + 1  # the record alone, one commit, no index touched
    path = RECORD.removeprefix("wheelhouse/")
    assert parse_failure(loophub.files(REPO_ID)[path], path).error.startswith("kern.cu(5)")
    plan = _plan(run, "--repo", HUB)
    assert plan["jobs"] == [] and len(plan["failed"]) == 1, plan  # type: ignore[arg-type]
    again = run("publish", wheel, "--sm", "86", "--torch", "2.9", "--cuda", "13.0", "--repo", HUB)
    assert again.code == 0, again.err
    card = loophub.files(REPO_ID)["README.md"].decode()
    assert "## Builds" in card and "Failed builds (1)" in card and "kern.cu(5): error" in card


def test_a_build_that_succeeds_settles_the_failure_recorded_for_its_cells(
    run: Run,
    tmp_path: Path,
    env: Path,  # noqa: F811
) -> None:
    failed = run("build", str(hostile_source(tmp_path, FAILS)), "--job", job(), "--torch-index", str(env))
    assert failed.code == 1 and (tmp_path / RECORD).is_file(), failed.err
    fixed = run("build", str(hostile_source(tmp_path)), "--job", job(), "--torch-index", str(env))
    assert fixed.code == 0, fixed.err
    assert not (tmp_path / RECORD).exists()  # removed in the change that filed the wheel
    assert "a failed build" not in run("verify").out
    assert _plan(run)["failed"] == [] and run("verify").code == 0


def test_a_source_is_known_by_its_sdist_its_checkout_or_its_requirement(tmp_path: Path) -> None:
    import subprocess

    from librarian.ops.build.build_facts import source_of
    from librarian.safeio import sha256_file

    tree = hostile_source(tmp_path)
    git = ["git", "-C", str(tree), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run(
        [*git, "remote", "add", "origin", "https://bot:ghp_s3cret@github.com/team/kern.git"], check=True
    )
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    clean = source_of(str(tree), str(tree))
    assert (clean.kind, clean.commit, clean.dirty) == ("folder", head, False)
    assert clean.vcs_url == "https://github.com/team/kern.git" and "s3cret" not in json.dumps(clean.to_json())
    assert (
        clean.key == f"commit:{head}"
        and clean.describe() == f"git https://github.com/team/kern.git @ {head[:12]}"
    )
    (tree / "hostile_mod.py").write_text("X = 3\n")
    dirty = source_of(str(tree), str(tree))
    assert dirty.dirty and dirty.key == f"sha256:{dirty.sha256}" and dirty.sha256 != clean.sha256
    (tree / "build").mkdir()  # earlier build output is left out, as the build's copy leaves it out
    (tree / "build" / "x.o").write_bytes(b"\0")
    assert source_of(str(tree), str(tree)).sha256 == dirty.sha256
    sdist = tmp_path / "kern-0.1.0.tar.gz"
    sdist.write_bytes(b"not really a tarball")
    assert source_of(str(sdist), str(sdist)) == Source("sdist", sdist.name, sha256_file(sdist))
    assert source_of("kern==0.1.0", "kern==0.1.0") == Source("requirement", "kern==0.1.0")


def test_cache_flags_go_with_a_build(run: Run) -> None:
    refused = run("pull", "tinykern", "--sm", "89", "--torch", "2.9", "--cache", "/tmp/x")
    assert refused.code == 2 and "--cache and --no-cache go with --build" in refused.err
    both = run("build", ".", "--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--cache", "c", "--no-cache")
    assert both.code == 2 and "--cache and --no-cache: choose one" in both.err


def test_the_caches_remote_storage_passes_through_and_is_never_printed(tmp_path: Path) -> None:
    from librarian.ops.build import compile_cache

    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    tool = tmp_path / "ccache"
    tool.write_text('#!/bin/sh\n[ "$1" = --version ] && exit 0\nexec "$@"\n')
    tool.chmod(0o755)
    (build := tmp_path / "build").mkdir()
    secret = "https://user:s3cret@cache.example/ccache|layout=bazel"
    said: list[str] = []
    cache = compile_cache.start(tool, tmp_path / "cc", str(toolkit), build,
                                {"PATH": "/usr/bin:/bin", "CCACHE_REMOTE_STORAGE": secret}, said.append)  # fmt: skip
    assert cache is not None and cache.env["CCACHE_REMOTE_STORAGE"] == secret  # untouched
    (build / "ccache-stats.log").write_text(
        "# a.cu\ndirect_cache_hit\n# b.cu\ncache_miss\n# c.cu\nremote_storage_hit\n"
    )
    line = cache.stats().line()
    assert (
        line
        == f"compile cache (ccache, {tmp_path / 'cc'} and its remote storage): 1 of 2 compile(s) from the cache"
    )
    assert "s3cret" not in line + "".join(said)
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    assert compile_cache.start(broken, tmp_path / "cc", str(toolkit), build, {}, said.append) is None
    assert said == [f"compile cache: {broken} does not run; building uncached"]


def test_a_store_lists_one_folder_without_its_tree(tmp_path: Path) -> None:
    """Plan reads the failure records by listing ``failures/`` alone (a local store walks that folder, the
    Hub lists that path), never the whole tree of a big store."""
    from librarian.errors import LibrarianError
    from librarian.stores import open_store

    (tmp_path / "s" / "failures" / "kern" / "0.1").mkdir(parents=True)
    (tmp_path / "s" / "failures" / "kern" / "0.1" / "a.json").write_text("{}")
    (tmp_path / "s" / "kern" / "sm89").mkdir(parents=True)
    (tmp_path / "s" / "kern" / "sm89" / "x.whl").write_bytes(b"PK")
    store = open_store(str(tmp_path / "s"))
    assert [f.path for f in store.list_folder("failures").files] == ["failures/kern/0.1/a.json"]  # type: ignore[attr-defined]
    assert store.list_folder("nothing-here").files == ()  # type: ignore[attr-defined]
    with pytest.raises(LibrarianError):
        store.list_folder("../s")  # type: ignore[attr-defined]
