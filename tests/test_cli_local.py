"""The local store end to end, as a user runs it: publish, ls, verify, pull, gc, and bad input."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run, pull_args

SO = {"tinykern/__init__.py": b"X = 1\n"}
CELL = "tinykern/sm89/torch2.8-cu128"
FILE = "tinykern-0.1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl"
FLAGS = ("--sm", "89", "--torch", "2.8", "--cuda", "12.8")


def tree(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != ".librarian.lock"
    }


def one_line_error(result, *needles: str, code: int = 2) -> None:  # type: ignore[no-untyped-def]
    """Bad usage or bad input: exit 2 (the README's contract), one line, no traceback."""
    assert result.code == code, result
    assert result.err.startswith("librarian: error: "), result.err
    assert "Traceback" not in result.err
    assert result.err.count("\n") == 1, result.err
    for needle in needles:
        assert needle in result.err


@pytest.fixture
def published(run: Run, tmp_path: Path) -> Path:
    make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    result = run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS)
    assert result.code == 0, result.err
    assert f"added  {CELL}/{FILE}" in result.out
    return tmp_path / "wheelhouse"


def test_publish_files_the_labelled_wheel(published: Path) -> None:
    assert tree(published) == {
        f"{CELL}/{FILE}",
        f"{CELL}/{FILE}.metadata",
        "index.json",
        "index/tinykern.json",
        "pages/sm89-torch2.8-cu128.html",
        "pages/sm89-torch2.8-cu128/simple/index.html",
        "pages/sm89-torch2.8-cu128/simple/tinykern/index.html",  # PEP 503, for pip --index-url
    }
    # PEP 658: the METADATA beside the wheel, and the page links it with its hash
    with zipfile.ZipFile(published / CELL / FILE) as zf:
        metadata = zf.read("tinykern-0.1.0+cu128torch2.8.dist-info/METADATA")
    assert (published / CELL / f"{FILE}.metadata").read_bytes() == metadata
    page = (published / "pages/sm89-torch2.8-cu128.html").read_text()
    assert f'data-core-metadata="sha256={hashlib.sha256(metadata).hexdigest()}"' in page
    shard = json.loads((published / "index/tinykern.json").read_text())
    assert [w["path"] for w in shard["wheels"]] == [f"{CELL}/{FILE}"]
    with zipfile.ZipFile(published / CELL / FILE) as zf:
        assert (
            "Version: 0.1.0+cu128torch2.8"
            in zf.read("tinykern-0.1.0+cu128torch2.8.dist-info/METADATA").decode()
        )


def test_publish_again_is_a_no_op_and_dry_run_writes_nothing(run: Run, published: Path) -> None:
    before = {p: (published / p).stat().st_mtime_ns for p in tree(published)}
    again = run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS)
    assert again.code == 0 and "unchanged" in again.out and "0 file(s) written" in again.out
    make_wheel(Path("dist2"), "tinykern", "0.2.0", "cp311-cp311-linux_x86_64", SO)
    dry = run("publish", "dist2/tinykern-0.2.0-cp311-cp311-linux_x86_64.whl", *FLAGS, "--dry-run")
    assert dry.code == 0 and "would add" in dry.out
    assert {p: (published / p).stat().st_mtime_ns for p in tree(published)} == before


def test_a_different_wheel_at_an_occupied_path_needs_replace(run: Run, published: Path) -> None:
    make_wheel(
        Path("other"), "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", {"tinykern/__init__.py": b"X = 2\n"}
    )
    refused = run("publish", "other/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS)
    assert refused.code == 2
    one_line_error(refused, FILE, "--replace")
    replaced = run("publish", "other/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS, "--replace")
    assert replaced.code == 0 and "replaced" in replaced.out
    assert run("verify").code == 0


def test_ls_shows_coverage_and_holes(run: Run, published: Path) -> None:
    make_wheel(Path("d"), "tinykern", "0.1.0", "cp312-cp312-linux_x86_64", SO)
    assert (
        run(
            "publish",
            "d/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl",
            "--sm",
            "90",
            "--torch",
            "2.9",
            "--cuda",
            "12.8",
        ).code
        == 0
    )
    result = run("ls")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split() == ["package", "torch-cuda", "sm89", "sm90"]
    assert lines[2].split() == ["tinykern", "torch2.9-cu128", "-", "0.1.0", "(312)"]
    assert lines[3].split() == ["tinykern", "torch2.8-cu128", "0.1.0", "(311)", "-"]
    data = json.loads(run("ls", "--json").out)
    assert data["schema"] == 2 and data["sms"] == ["sm89", "sm90"]
    assert data["packages"]["tinykern"]["torch2.8-cu128"]["sm90"] == []
    paths = data["packages"]["tinykern"]["torch2.8-cu128"][
        "sm89"
    ]  # cells list paths; each wheel is listed once
    wheels = {w["path"]: w for w in data["wheels"]}
    assert paths and set(paths) <= set(wheels) and len(wheels) == len(data["wheels"])
    assert all("facts" not in w for w in wheels.values()) and set(data["facts"]) <= {
        w["sha256"] for w in wheels.values()
    }


def test_verify_passes_then_names_each_problem(run: Run, published: Path) -> None:
    assert run("verify").code == 0
    wrong = published / "tinykern/sm90/torch2.8-cu128"
    wrong.mkdir(parents=True)
    shutil.move(str(published / CELL / FILE), wrong / FILE)
    result = run("verify")
    assert result.code == 1
    assert f"tinykern/sm90/torch2.8-cu128/{FILE}: not in the index" in result.out
    assert f"{CELL}/{FILE}: in the index but not in the store" in result.out


def test_verify_catches_an_edited_metadata(run: Run, published: Path) -> None:
    path = published / CELL / FILE
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    meta = "tinykern-0.1.0+cu128torch2.8.dist-info/METADATA"
    members[meta] = members[meta].replace(b"Version: 0.1.0+cu128torch2.8", b"Version: 0.1.1+cu128torch2.8")
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    result = run("verify")
    assert result.code == 1
    assert (
        f"{CELL}/{FILE}: METADATA Version: 0.1.1+cu128torch2.8, filename says 0.1.0+cu128torch2.8"
        in result.out
    )
    assert "sha256" in result.out
    deep = run("verify", "--deep")
    assert deep.code == 1 and "RECORD" in deep.out


def test_verify_catches_a_label_that_disagrees_with_its_cell(run: Run, published: Path) -> None:
    other = published / "tinykern/sm89/torch2.9-cu128"
    other.mkdir(parents=True)
    shutil.copy(published / CELL / FILE, other / FILE)
    result = run("verify", "--json")
    assert result.code == 1
    problems = json.loads(result.out)["problems"]
    assert {
        "path": f"tinykern/sm89/torch2.9-cu128/{FILE}",
        "problem": "labelled cu128torch2.8 but filed under torch2.9-cu128",
    } in problems


def test_pull_exact_and_explained_miss(run: Run, published: Path, tmp_path: Path) -> None:
    got = run(*pull_args("TinyKern"))
    assert got.code == 0, got.err
    assert (tmp_path / "out" / FILE).read_bytes() == (published / CELL / FILE).read_bytes()
    # It links no torch (a plain ELF file): torch 2.9 runs it too, and pull says why it took a 2.8 build.
    later = run(*pull_args("tinykern", torch="2.9", out="out2"))
    assert later.code == 0 and "(built for torch 2.8, cu128): the wheel does not link torch" in later.err
    py = run(*pull_args("tinykern", python="3.12", out="out3"))
    assert py.code == 1 and "another Python: cp311, this interpreter is cp312" in py.err
    # It carries no GPU code: filed under sm89 by --sm, it runs on any GPU, and pull says where it was filed.
    gpu = run(*pull_args("tinykern", sm="90", out="out4"))
    assert gpu.code == 0 and "filed under sm89; it runs here by no GPU code of its own" in gpu.err, gpu


def test_pull_refuses_bytes_that_do_not_match_the_index(run: Run, published: Path, tmp_path: Path) -> None:
    stored = published / CELL / FILE
    stored.write_bytes(stored.read_bytes() + b"tampered")
    result = run(*pull_args("tinykern"))
    assert result.code == 2
    one_line_error(result, "do not match the index's sha256")
    assert not (tmp_path / "out" / FILE).exists()
    assert [p.name for p in (tmp_path / "out").iterdir()] == []


def test_gc_plans_then_acts_only_with_yes(run: Run, published: Path) -> None:
    make_wheel(Path("d"), "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    assert (
        run(
            "publish",
            "d/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl",
            "--sm",
            "89",
            "--torch",
            "2.9",
            "--cuda",
            "12.8",
        ).code
        == 0
    )
    before = tree(published)
    plan = run("gc", "--drop-torch", "2.8")
    assert plan.code == 0 and f"remove  {CELL}/{FILE}" in plan.out and "pass --yes" in plan.out
    assert tree(published) == before
    done = run("gc", "--drop-torch", "2.8", "--yes")
    assert done.code == 0 and "removed 1 wheel file(s)" in done.out
    # the wheel goes with its PEP 658 METADATA file and its page
    assert tree(published) == before - {
        f"{CELL}/{FILE}",
        f"{CELL}/{FILE}.metadata",
        "pages/sm89-torch2.8-cu128.html",
        "pages/sm89-torch2.8-cu128/simple/index.html",
        "pages/sm89-torch2.8-cu128/simple/tinykern/index.html",
    }
    shard = json.loads((published / "index/tinykern.json").read_text())
    assert [w["label"] for w in shard["wheels"]] == ["cu128torch2.9"]
    assert run("verify").code == 0
    assert "remove 0 wheel" in run("gc", "--drop-torch", "2.8").out


def test_gc_needs_a_rule(run: Run, published: Path) -> None:
    one_line_error(run("gc"), "--keep-torch")


def _bad_inputs(d: Path) -> dict[str, tuple[Path, str]]:
    d.mkdir()
    not_zip = d / "notzip-1.0-cp311-cp311-linux_x86_64.whl"
    not_zip.write_bytes(b"hello")
    good = make_wheel(
        d / "g", "trunc", "1.0", "cp311-cp311-linux_x86_64", {"trunc/__init__.py": os.urandom(4000)}
    )
    truncated = d / good.name
    truncated.write_bytes(good.read_bytes()[:-100])
    liar = make_wheel(
        d,
        "liar",
        "1.0",
        "cp311-cp311-linux_x86_64",
        {"liar/__init__.py": b"x"},
        record_override={"liar/__init__.py": "sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
    )
    evil = make_wheel(
        d, "evil", "1.0", "cp311-cp311-linux_x86_64", {"evil/__init__.py": b"", "../evil": b"boom"}
    )
    return {
        "not a zip": (not_zip, "not a zip file"),
        "truncated": (truncated, truncated.name),
        "record lies": (liar, "liar/__init__.py"),
        "escaping member": (evil, "../evil"),
    }


@pytest.mark.parametrize("case", ["not a zip", "truncated", "record lies", "escaping member"])
def test_bad_input_is_one_line_exit_2_nothing_written(run: Run, tmp_path: Path, case: str) -> None:
    path, needle = _bad_inputs(tmp_path / "bad")[case]
    result = run("publish", str(path), *FLAGS)
    assert result.code == 2, result
    one_line_error(result, needle)
    assert not (tmp_path / "wheelhouse").exists() or tree(tmp_path / "wheelhouse") == set()
    retag = run("retag", str(path), "--torch", "2.8", "--cuda", "12.8", "-o", "out")
    assert retag.code == 2
    one_line_error(retag, needle)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--sm", "../../x"), "not a GPU arch"),
        (("--frobnicate",), "No such option: --frobnicate"),
        (("--torch", "banana", "--cuda", "12.8", "--sm", "89"), "not a torch version"),
    ],
)
def test_bad_flags_are_one_line(run: Run, published: Path, argv: tuple[str, ...], needle: str) -> None:
    result = run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *argv)
    assert result.code == 2
    one_line_error(result, needle)


def test_retag_labels_and_refuses_relabel(run: Run, tmp_path: Path) -> None:
    src = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    result = run("retag", str(src), "--torch", "2.8", "--cuda", "12.8", "-o", "out")
    assert result.code == 0 and result.out.strip().endswith(FILE)
    again = run("retag", f"out/{FILE}", "--torch", "2.9", "--cuda", "12.8", "-o", "out")
    assert again.code == 2
    one_line_error(again, "is labelled cu128torch2.8", "--relabel")
    forced = run("retag", f"out/{FILE}", "--torch", "2.9", "--cuda", "12.8", "-o", "out", "--relabel")
    assert forced.code == 0 and "+cu128torch2.9" in forced.out
    # the old spelling still works for now, and says what it became
    old = run("retag", f"out/{FILE}", "--torch", "2.7", "--cuda", "12.8", "-o", "out", "--force")
    assert (
        old.code == 0 and "+cu128torch2.7" in old.out and "deprecated" in old.err and "--relabel" in old.err
    )


def test_repo_from_env_and_pyproject(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    (tmp_path / "pyproject.toml").write_text('[tool.librarian]\nrepo = "from-pyproject"\n')
    assert run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS).code == 0
    assert (tmp_path / "from-pyproject" / CELL / FILE).is_file()
    monkeypatch.setenv("LIBRARIAN_REPO", str(tmp_path / "from-env"))
    assert run("publish", "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl", *FLAGS).code == 0
    assert (tmp_path / "from-env" / CELL / FILE).is_file()


def test_verify_treats_the_metadata_file_as_part_of_its_wheel(run: Run, published: Path) -> None:
    meta = published / CELL / f"{FILE}.metadata"
    saved = meta.read_bytes()
    meta.write_bytes(saved + b"X-Tampered: yes\n")
    assert f"{CELL}/{FILE}.metadata: does not match the METADATA" in run("verify").out
    meta.unlink()
    missing = run("verify")
    assert (
        missing.code == 1
        and f"{CELL}/{FILE}.metadata: the wheel's METADATA file (PEP 658) is missing" in missing.out
    )
    orphan = published / "tinykern/sm90/torch2.8-cu128" / f"{FILE}.metadata"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(saved)
    assert "METADATA file (PEP 658) of a wheel that is not in the store" in run("verify").out


def test_ls_json_grows_with_files_not_files_times_cells(run: Run, tmp_path: Path) -> None:
    """The same bytes filed under many GPUs: their facts are in the JSON once, not once per cell."""
    samples = sorted(
        str(p) for p in (Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl")
    )
    assert (
        run("publish", samples[0], "--torch", "2.9", "--cuda", "13.0", "--repo", "one").code == 0
    )  # 4 cells
    data = json.loads(run("ls", "--json", "--repo", "one").out)
    assert len(data["wheels"]) == 4 and len(data["facts"]) == 1  # one sha256: its facts once
    assert {w["sha256"] for w in data["wheels"]} == set(data["facts"])
    assert sum(json.dumps(w).count('"archs"') for w in data["wheels"]) == 0


def test_ls_html_writes_the_coverage_page(run: Run, published: Path) -> None:
    other = make_wheel(published.parent / "d2", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64", SO)
    assert run("publish", str(other), "--sm", "90", "--torch", "2.9", "--cuda", "12.8").code == 0  # holes: 2
    result = run("ls", "--html", "coverage.html")
    assert result.code == 0
    page = (published.parent / "coverage.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<th>tinykern</th>" in page and "torch2.8-cu128" in page
    data = json.loads(run("ls", "--json").out)
    holes = sum(
        1
        for combos in data["packages"].values()
        for cells in combos.values()
        for paths in cells.values()
        if not paths
    )
    assert holes > 0 and page.count('class="hole"') == holes  # the same holes as the text table marks
    # every CSS rule closed once: a stray brace dropped the rule that shades the holes
    style = page.split("<style>")[1].split("</style>")[0]
    assert "}}" not in style and style.count("{") == style.count("}") and ".hole{background:#fdd" in style
    assert f"wrote the coverage page to {published.parent / 'coverage.html'}" in result.err


def test_gc_says_small_sizes_in_their_own_unit() -> None:
    from librarian.ops.store.gc_report import say_size

    assert [say_size(n) for n in (0, 999, 1_000, 35_128, 4_500_000, 1_200_000_000, 9 * 10**12)] == [
        "0 bytes", "999 bytes", "1.0 KB", "35.1 KB", "4.5 MB", "1.2 GB", "9000.0 GB"
    ]  # fmt: skip


def test_a_dry_run_measures_the_relabelled_wheel_without_writing_it(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """publish --dry-run relabels in passing: every check, the sha256 and size a real publish stores, and
    no file the size of the wheel (a 1 GB wheel's dry run must not need 1 GB of disk)."""
    from librarian import safeio

    payload = os.urandom(3 << 20)  # incompressible: the relabelled copy would be > 3 MiB
    make_wheel(
        tmp_path / "dist",
        "tinykern",
        "0.1.0",
        "cp311-cp311-linux_x86_64",
        {**SO, "tinykern/blob.bin": payload},
    )
    src = "dist/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl"
    written: list[Path] = []
    real_output = safeio.atomic_output

    def watched(target: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        written.append(target)
        return real_output(target, *args, **kwargs)

    monkeypatch.setattr(safeio, "atomic_output", watched)
    monkeypatch.setattr("librarian.wheel.relabel.atomic_output", watched)
    dry = run("publish", src, *FLAGS, "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert not [p for p in written if p.suffix == ".whl"], (
        written
    )  # no relabelled copy, even in a temp folder
    planned = json.loads(dry.out)["filings"]
    real = run("publish", src, *FLAGS, "--json")
    assert real.code == 0, real.err
    assert [p for p in written if p.suffix == ".whl"]  # the real run does write it (the watch works)
    assert json.loads(real.out)["filings"] == planned  # same path, same sha256, measured without the file
    stored = json.loads((tmp_path / "wheelhouse/index/tinykern.json").read_text())["wheels"][0]
    assert stored["size"] == (tmp_path / "wheelhouse" / CELL / FILE).stat().st_size


def test_verify_deep_says_each_finding_once_per_bytes_in_a_store_copied_without_hard_links(
    run: Run, tmp_path: Path
) -> None:
    """A store copied with cp -r keeps a file per cell where publish hard-linked one: the findings of the
    same bytes are still said once, naming every path (they were said once per cell)."""
    import shutil

    sample = min((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))
    published = run("publish", str(sample), "--torch", "2.9", "--cuda", "12.8", "--allow-cuda-mismatch")
    assert published.code == 0, published.err
    shutil.copytree(tmp_path / "wheelhouse", tmp_path / "copy")  # no hard links: four files, one sha256
    linked = run("verify", "--deep")
    copied = run("verify", "--deep", "--repo", "copy")
    assert linked.code == copied.code == 0
    said = [line for line in copied.out.splitlines() if "accepted at publish (" in line]
    assert len(said) == 2 and said == [
        line for line in linked.out.splitlines() if "accepted at publish (" in line
    ]


def test_ls_shows_the_platform_where_the_store_has_several_and_folds_wide_tables(
    run: Run, tmp_path: Path
) -> None:
    """Linux x86_64, aarch64 and Windows builds of one version shared one cell; a wheel filed for many GPUs
    made the table hundreds of columns wide."""
    x86 = ("50", "52", "60", "61", "70", "75", "80", "86", "89", "90", "100", "103", "120")
    arm = ("75", "80", "86", "87", "89", "90", "100", "110", "120", "121")  # Jetson and GB10 only here
    for tag, sms in (("cp311-cp311-manylinux_2_28_x86_64", x86), ("cp311-cp311-manylinux_2_28_aarch64", arm),
                     ("cp311-cp311-win_amd64", x86)):  # fmt: skip
        wheel = make_wheel(tmp_path / "dist" / tag, "tinykern", "0.1.0", tag)
        flags = [x for sm in sms for x in ("--sm", sm)]
        done = run("publish", str(wheel), "--torch", "2.9", "--cuda", "12.8", "--trust-sm", *flags)
        assert done.code == 0, done.err
    sms = sorted(set(x86) | set(arm), key=int)
    out = run("ls").out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 160, max(len(line) for line in lines)
    assert all(f"sm{sm}" in out for sm in sms)
    assert lines[0].split()[:3] == ["package", "torch-cuda", "platform"]
    for platform in ("linux-x86_64", "linux-aarch64", "windows-x86_64"):
        assert sum(platform in line for line in lines) >= 2, platform  # a row in each folded table
    assert out.count("package  ") >= 2  # folded: the row heads again
