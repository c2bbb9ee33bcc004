"""The variant format's values (issue 43, items 1 and 7): the label as a parsed and printed value, the one raw
rewriter with two plans (retag's and the variant's), and one variant wheel per build, however many cells or
torch labels the build is filed under."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile  # the test oracle for RECORD

from librarian import progress
from librarian.variant_format import VariantLabel, parse_label
from librarian.wheel.record import Record
from librarian.wheel.rewrite import RewritePlan, bind, metadata_with_version, write_rewrite
from librarian.wheel.wheelfile import open_wheel
from librarian.wheel.zipwriter import RawZipWriter
from tests.builders import make_wheel
from tests.conftest import Run
from tests.gpu_wheels import gpu_sos, isolate_machine, so_wheel


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")


@pytest.mark.parametrize(
    ("values", "digest", "printed"),
    [
        (["86_real"], "43b62caf" + "0" * 56, "sm86.43b62caf"),
        (["75_real", "80_real", "120_real", "120_virtual"], "ABCDEF12", "sm75_120.abcdef12"),
        (["90_real", "80_virtual"], "00000001", "sm80_90.00000001"),
        ([], "deadbeef", "nogpu.deadbeef"),
    ],
)
def test_a_label_is_printed_from_its_build_and_parsed_back(
    values: list[str], digest: str, printed: str
) -> None:
    label = VariantLabel.of(values, digest)
    assert str(label) == printed
    assert VariantLabel.parse(printed) == label


@pytest.mark.parametrize(
    "text",
    ["sm89.cu128torch2.9", "sm89", "SM89.abcdef12", "sm89.abcdef1", "sm89.abcdef123", "gpu.abcdef12", ""],
)
def test_what_is_not_a_label_is_refused(text: str) -> None:
    """A cell's label of the earlier format (``sm89.cu128torch2.9``) is not a build's: refused, not guessed."""
    assert parse_label(text) is None
    with pytest.raises(ValueError, match="not a variant label"):
        VariantLabel.parse(text)


def test_one_rewriter_owns_record_for_a_plan_that_replaces_and_adds(tmp_path: Path) -> None:
    """A plan renaming to a new version, replacing METADATA and adding two members: the wheel written holds
    for ``wheel``'s own RECORD check, the added members sit in the new .dist-info with rows of their own,
    and a signature of the old RECORD is dropped."""
    src = make_wheel(
        tmp_path / "dist",
        "tinykern",
        "1.0+cu128torch2.9",
        "cp311-cp311-linux_x86_64",
        {"tinykern/__init__.py": b"x = 1\n", "tinykern-1.0+cu128torch2.9.dist-info/RECORD.jws": b"sig"},
    )
    out = tmp_path / "out" / "tinykern-1.0-cp311-cp311-linux_x86_64.whl"
    out.parent.mkdir()
    with open_wheel(src) as w:
        record = Record(w)
        metadata, _ = w.headers("METADATA")
        plan = RewritePlan(
            "1.0",
            {w.member("METADATA").orig_filename: metadata_with_version(w, metadata, "1.0")},
            {"variant.json": b"{}\n", "extra.txt": b"hello\n"},
        )
        rewrite = bind(w, record, plan)
        with out.open("wb") as f, progress.task("t", total=0) as bar:
            write_rewrite(rewrite, record, RawZipWriter(f), False, bar)  # type: ignore[arg-type]
    with WheelFile(out) as wf:  # reads every member against RECORD
        for name in wf.namelist():
            wf.read(name)
        names = wf.namelist()
        record_text = wf.read("tinykern-1.0.dist-info/RECORD").decode()
        assert wf.read("tinykern-1.0.dist-info/extra.txt") == b"hello\n"
    assert "tinykern-1.0.dist-info/variant.json" in names and "tinykern-1.0.dist-info/extra.txt" in names
    assert not any(n.endswith("RECORD.jws") for n in names) and "RECORD.jws" not in record_text
    assert names[-1] == "tinykern-1.0.dist-info/RECORD"  # the added members come before it
    assert "tinykern-1.0.dist-info/variant.json,sha256=" in record_text


def test_one_build_under_two_torch_labels_and_four_cells_is_one_variant_wheel(
    run: Run, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A torch-free build filed for torch 2.9 and 2.10 and two GPUs each: four stored wheels, one variant
    wheel (the same members at the public version, the same properties); the store grows by one copy."""
    sos = gpu_sos(tmp_path_factory)
    wheel = so_wheel(tmp_path / "a", sos["sm_86"], name="free", version="1.0")
    for torch in ("2.9", "2.10"):
        done = run("publish", str(wheel), "--cuda", "13.0", "--torch", torch, "--sm", "86", "--sm", "89",
                   "--variants")  # fmt: skip
        assert done.code == 0, done.err
    store = tmp_path / "wheelhouse"
    stored = sorted(store.glob("free/*/*/*.whl"))
    variants = sorted((store / "variant-wheels/free").glob("*.whl"))
    assert len(stored) == 4 and len(variants) == 1, (stored, variants)
    recorded = {
        w["variant"]["filename"] for w in json.loads((store / "index/free.json").read_text())["wheels"]
    }
    assert recorded == {variants[0].name}
    doc = json.loads((store / "variants/free-1.0-variants.json").read_text())
    assert list(doc["variants"]) == [variants[0].stem.rsplit("-", 1)[1]]
    with zipfile.ZipFile(variants[0]) as zf:
        assert zf.read("free-1.0.dist-info/METADATA").splitlines()[2] == b"Version: 1.0"
    assert run("verify", "--deep").code == 0
    listed = run("ls")
    assert "1 variant wheel(s) for 4 filed wheel(s)" in listed.out, listed.out
    gone = run("gc", "--drop-torch", "2.9", "--yes")
    assert gone.code == 0, gone.err
    assert variants[0].is_file()  # the 2.10 wheels still name it
    assert run("verify", "--deep").code == 0
