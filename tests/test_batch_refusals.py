"""A batch publish names every refusal in one run (issue 46 item 3): a farm's ``dist/*.whl`` once needed a
run per refused wheel to learn its flags. Nothing is filed unless all pass; ``--skip-refused`` files the rest
and exits 1, naming what it skipped."""

from __future__ import annotations

import json
from pathlib import Path

from tests.builders import make_wheel
from tests.conftest import Run
from tests.test_stable_abi import OLD
from tests.test_torch_lines import extension

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))


def refused_two_ways(tmp_path: Path) -> list[Path]:
    """A wheel whose own torch requirement excludes the label, and one tagged for an older glibc than its .so."""
    torchy = make_wheel(tmp_path / "a", "needs210", "1.0", "cp312-cp312-linux_x86_64",
                        {"needs210/_C.so": extension(("libtorch.so",), {OLD: False})},
                        requires_dist=("torch>=2.10",))  # fmt: skip
    from tests.cuda_fixtures import elf_bytes

    old_tag = make_wheel(tmp_path / "b", "oldtag", "1.0", "cp312-cp312-manylinux_2_17_x86_64",
                         {"oldtag/_C.so": elf_bytes(verneed={"libc.so.6": ("GLIBC_2.34",)})})  # fmt: skip
    return [torchy, old_tag]


def test_every_refusal_of_a_batch_is_named_in_one_run_and_nothing_is_filed(run: Run, tmp_path: Path) -> None:
    batch = [*map(str, SAMPLES), *map(str, refused_two_ways(tmp_path))]
    result = run("publish", *batch, "--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--trust-sm")
    assert result.code == 2, result.err
    lines = result.err.splitlines()
    assert lines[0].startswith("librarian: error: 2 of 5 wheel(s) refused, nothing filed")
    assert "--allow-glibc-mismatch" in lines[0] and "--allow-torch-mismatch" in lines[0]
    assert any("needs210" in line and "--allow-torch-mismatch" in line for line in lines[1:])
    assert any("oldtag" in line and "--allow-glibc-mismatch" in line for line in lines[1:])
    assert not (tmp_path / "wheelhouse").exists() or not list((tmp_path / "wheelhouse").rglob("*.whl"))


def test_skip_refused_files_the_rest_and_exits_1_naming_the_skipped(run: Run, tmp_path: Path) -> None:
    batch = [*map(str, SAMPLES), *map(str, refused_two_ways(tmp_path))]
    result = run("publish", *batch, "--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--trust-sm",
                 "--skip-refused", "--json")  # fmt: skip
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    assert len(doc["skipped"]) == 2 and len(doc["filings"]) == 3
    assert len(list((tmp_path / "wheelhouse").rglob("tinykern-*.whl"))) == 3
    one = run("publish", str(refused_two_ways(tmp_path / "again")[0]), "--torch", "2.9", "--cuda", "13.0")
    assert one.code == 2 and one.err.count("\n") == 1  # one refusal: its own one line, as before
