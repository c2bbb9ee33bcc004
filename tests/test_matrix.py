"""The combo matrix: packaged data, checks on load, queries, overrides and renderings."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from librarian.coords import GpuArch, Label
from librarian.errors import BadInput
from librarian.pytorch.matrix import (
    CPython,
    CxxAbi,
    Matrix,
    MatrixDoc,
    Platform,
    Selection,
    Status,
    dump_matrix,
    load_matrix,
    merge_matrix,
    override_path,
    packaged_matrix,
    parse_matrix,
)
from librarian.pytorch.matrix_render import github_matrix, matrix_json, render_table

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return Matrix(packaged_matrix())


def row_toml(extra: str = "") -> str:
    return f"""schema = 1
[[torch]]
version = "2.15"
[[torch.cuda]]
line = "13.4"
status = "stable"
abi = "cxx11"
python = ["cp312"]
platforms = ["linux-x86_64"]
source = "test"
date = 2026-10-01
{extra}"""


# --- the packaged data --------------------------------------------------------------------------


def test_packaged_file_is_what_the_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_matrix", ROOT / "scripts" / "make_matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    packaged = (ROOT / "librarian" / "data" / "matrix.toml").read_text(encoding="utf-8")
    assert dump_matrix(module.document()) == packaged, "run: python scripts/make_matrix.py"


def test_torch_2_8_lines(matrix: Matrix) -> None:
    assert matrix.cuda_lines_for("2.8") == ((12, 6), (12, 8), (12, 9))
    assert {c.cuda for c in matrix.select(Selection.parse(torch=["2.8"]))} == {(12, 6), (12, 8), (12, 9)}


def test_torch_2_4(matrix: Matrix) -> None:
    assert not matrix.is_shipped(Label.parse("cu129torch2.4"))
    assert matrix.cuda_lines_for("2.4") == ((11, 8), (12, 1), (12, 4))
    assert matrix.is_shipped(Label.parse("cu121torch2.4"))
    assert [str(x) for x in matrix.labels_for_torch("2.4")] == [
        "cu118torch2.4",
        "cu121torch2.4",
        "cu124torch2.4",
    ]
    assert {c.abi for c in matrix.combos(torch="2.4")} == {CxxAbi.PRE_CXX11}
    assert CPython(3, 8) in {c.python for c in matrix.combos(torch="2.4")}


def test_every_minor_2_4_to_2_14_has_three_release_lines(matrix: Matrix) -> None:
    for minor in range(4, 15):
        release = {c.cuda for c in matrix.combos(torch=(2, minor)) if c.status is not Status.SERVED}
        assert len(release) == 3, minor


def test_cu129_is_served_past_2_8(matrix: Matrix) -> None:
    assert matrix.status(Label.parse("cu129torch2.8")) is Status.EXPERIMENTAL
    for minor in range(9, 14):
        assert matrix.status(Label((12, 9), (2, minor))) is Status.SERVED
    assert not matrix.is_shipped(Label.parse("cu129torch2.14"))
    assert not matrix.is_shipped(Label.parse("cu128torch2.12"))  # cu128 gone from 2.12 on


def test_cxx_abi_switch(matrix: Matrix) -> None:
    assert {c.abi for c in matrix.combos(torch="2.6", cuda="12.6")} == {CxxAbi.CXX11}
    assert {c.abi for c in matrix.combos(torch="2.6", cuda="12.4")} == {CxxAbi.PRE_CXX11}
    assert {c.abi for c in matrix.combos(torch="2.7")} == {CxxAbi.CXX11}


def test_free_threaded_and_python_filter(matrix: Matrix) -> None:
    assert matrix.combos(torch="2.9", python="3.13t") == ()
    assert matrix.combos(torch="2.10", python="cp313t")
    cp315 = matrix.combos(torch="2.13", cuda="13.0", python="3.15")
    assert cp315 and {c.status for c in cp315} == {Status.EXPERIMENTAL}


def test_torch_versions_newest_first(matrix: Matrix) -> None:
    every = sorted({t.version for t in matrix.doc.torch}, reverse=True)
    assert matrix.torch_versions()[:3] == tuple(every[:3])


def test_arch_list(matrix: Matrix) -> None:
    cu130 = matrix.arch_list("13.0")
    assert cu130 is not None and cu130.arch_list == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert GpuArch.parse("sm_89") not in cu130.sass  # Ada runs torch's sm_86 code
    assert cu130.ptx == (GpuArch.parse("compute_120"),)
    aarch64 = matrix.arch_list((13, 0), Platform.LINUX_AARCH64)
    assert aarch64 is not None and GpuArch.parse("sm_110") in aarch64.sass
    windows = matrix.arch_list((13, 2), Platform.WINDOWS_AMD64)
    assert windows is not None and windows.ptx == ()
    assert matrix.arch_list("11.8") is None  # no source read: build_arch_list derives one (test_plan.py)
    older = matrix.arch_list("12.6", torch="2.9")  # no source for 2.9's list: the newest known stands in
    assert older is not None and older.torch == ((2, 12), (2, 13), (2, 14))


def test_every_row_names_a_source(matrix: Matrix) -> None:
    for t in matrix.doc.torch:
        for c in t.cuda:
            assert c.source and isinstance(c.date, dt.date)


# --- selection and renderings -------------------------------------------------------------------


def test_github_matrix_one_job_per_cell(matrix: Matrix) -> None:
    sel = Selection.parse(torch=["2.13", "2.14"], python=["3.12", "3.13"], platform=["linux-x86_64"])
    doc = json.loads(json.dumps(github_matrix(matrix, sel)))
    include = doc["include"]
    cells = {(j["torch"], j["cuda"], j["python"]) for j in include}
    assert len(include) == len(cells)
    assert {j["torch"] for j in include} == {"2.13", "2.14"}
    job = next(j for j in include if j["torch"] == "2.14" and j["cuda"] == "13.0" and j["python"] == "3.12")
    assert job == {
        "torch": "2.14",
        "cuda": "13.0",
        "python": "3.12",
        "python-tag": "cp312",
        "platform": "linux-x86_64",
        "runs-on": "ubuntu-22.04",
        "label": "cu130torch2.14",
        "status": "stable",
        "TORCH_CUDA_ARCH_LIST": "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
        "arch-source": "[R] pytorch/pytorch RELEASE.md, arch lists 'For Release 2.12, 2.13 and 2.14'",
        "container": "pytorch/manylinux2_28-builder:cuda13.0",
        "torch-install": "torch==2.14.* --index-url https://download.pytorch.org/whl/cu130",
    }


def test_stable_only_drops_served_and_experimental(matrix: Matrix) -> None:
    stable = matrix.select(Selection.parse(torch=["2.12"], stable_only=True))
    assert {c.cuda for c in stable} == {(12, 6), (13, 0)}
    assert {c.status for c in stable} == {Status.STABLE}


def test_selection_rejects_bad_input() -> None:
    with pytest.raises(BadInput, match="linux-x86_64"):
        Selection.parse(platform=["solaris"])
    with pytest.raises(BadInput):
        Selection.parse(newest=0)
    with pytest.raises(BadInput):
        Selection.parse(python=["python3"])


def test_json_document(matrix: Matrix) -> None:
    doc = matrix_json(matrix.combos(torch="2.8", cuda="12.8", python="3.12"))
    assert doc["schema"] == 1
    assert {c["platform"] for c in doc["combos"]} == {"linux-x86_64", "linux-aarch64", "windows-amd64"}
    assert doc["combos"][0]["label"] == "cu128torch2.8"


def test_render_table(matrix: Matrix) -> None:
    text = render_table(matrix.combos(torch="2.8"))
    lines = text.splitlines()
    assert lines[0].split() == ["TORCH", "CUDA", "LABEL", "STATUS", "ABI", "PYTHON", "PLATFORMS"]
    assert len(lines) in (4, 5) and "cu129torch2.8" in text
    assert render_table(()) == "no combos match\n"


def test_inferred_fields_are_marked_in_the_table_and_the_json() -> None:
    """A row's ``uncertain`` fields are inference, not read from a source: the table marks them, --json
    lists them; a row without any says nothing of it."""

    def doc(uncertain: str) -> Matrix:
        return Matrix(
            parse_matrix(
                'schema = 1\n[[torch]]\nversion = "2.8"\n[[torch.cuda]]\nline = "12.8"\nstatus = "stable"\n'
                'abi = "cxx11"\npython = ["cp312"]\nplatforms = ["linux-x86_64"]\nsource = "s"\n'
                f"date = 2026-10-01\n{uncertain}",
                "m.toml",
            )
        )

    sure, guessed = doc(""), doc('uncertain = ["platforms", "date"]\n')
    assert "*" not in render_table(sure.combos()) and "inferred" not in render_table(sure.combos())
    lines = render_table(guessed.combos()).splitlines()
    assert lines[1].split()[-1] == "linux-x86_64*" and lines[1].split()[4] == "cxx11"
    assert lines[-1].startswith("* inferred, not read from a source")
    assert matrix_json(guessed.combos())["combos"][0]["inferred"] == ["platforms", "date"]
    assert matrix_json(sure.combos())["combos"][0]["inferred"] == []


# --- the file format ----------------------------------------------------------------------------


def test_round_trip(matrix: Matrix) -> None:
    text = dump_matrix(matrix.doc)
    assert parse_matrix(text, "x") == matrix.doc
    assert dump_matrix(parse_matrix(text, "x")) == text


def test_unknown_fields_rejected_naming_the_file() -> None:
    with pytest.raises(BadInput) as e:
        parse_matrix(
            row_toml('colour = "red"') + '\n[[arch]]\ncuda="12.8"\nplatform="linux-x86_64"\n'
            'arch_list="8.0"\nsource="s"\nflavour=1\n',
            "/home/u/.config/librarian/matrix.toml",
        )
    message = str(e.value)
    assert message.startswith("/home/u/.config/librarian/matrix.toml: ")
    assert "torch[2.15].cuda[13.4]: unknown field 'colour'" in message
    assert "arch[0]: unknown field 'flavour'" in message  # every problem, not just the first


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("schema = 2", "schema"),
        (row_toml().replace('status = "stable"', 'status = "beta"'), "status"),
        (row_toml().replace("date = 2026-10-01", 'date = "yesterday"'), "expected a date"),
        (row_toml().replace('["cp312"]', '["py3"]'), "not a CPython"),
        (row_toml('uncertain = ["vibes"]'), "names no field"),
        (row_toml().replace('line = "13.4"\n', ""), "missing field 'line'"),
        (row_toml() + row_toml().split("\n", 3)[3], "given twice"),
        (
            "schema = 1\n[[arch]]\ncuda='12.8'\nplatform='linux-x86_64'\narch_list='sm_80'\nsource='s'",
            "TORCH_CUDA",
        ),
        ("schema = 1\ntorch = 3", "array of tables"),
        ("schema = [", "not valid TOML"),
    ],
)
def test_invalid_files(text: str, problem: str) -> None:
    with pytest.raises(BadInput, match=problem):
        parse_matrix(text, "m.toml")


def test_merge_adds_and_replaces(matrix: Matrix) -> None:
    over = parse_matrix(
        row_toml() + '\n[[torch]]\nversion = "2.8"\n[[torch.cuda]]\nline = "12.8"\n'
        'status = "experimental"\nabi = "cxx11"\npython = ["cp312"]\n'
        'platforms = ["linux-x86_64"]\nsource = "mine"\ndate = 2026-10-01\n',
        "o.toml",
    )
    merged = Matrix(merge_matrix(matrix.doc, over))
    assert merged.is_shipped(Label.parse("cu134torch2.15"))
    assert merged.status(Label.parse("cu128torch2.8")) is Status.EXPERIMENTAL
    assert merged.cuda_lines_for("2.8") == ((12, 6), (12, 8), (12, 9))  # others kept


# --- loading and the override location ----------------------------------------------------------


def test_load_matrix_reads_the_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.toml"
    path.write_text(row_toml())
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(path))
    assert load_matrix().is_shipped(Label.parse("cu134torch2.15"))
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(tmp_path / "absent.toml"))
    assert not load_matrix().is_shipped(Label.parse("cu134torch2.15"))


def test_load_matrix_names_a_bad_override(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(row_toml("bogus = 1"))
    with pytest.raises(BadInput, match=f"^{path}: .*bogus"):
        load_matrix(path)


def test_override_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert override_path({"LIBRARIAN_MATRIX": "/a/m.toml", "XDG_CONFIG_HOME": "/x"}) == Path("/a/m.toml")
    assert override_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/librarian/matrix.toml")
    if sys.platform != "win32":
        home = Path.home() / ".config" / "librarian" / "matrix.toml"
        assert override_path({"XDG_CONFIG_HOME": "relative"}) == home
        assert override_path({}) == home


# --- small values -------------------------------------------------------------------------------


@given(st.integers(3, 9), st.integers(0, 30), st.booleans())
def test_cpython_round_trip(major: int, minor: int, free: bool) -> None:
    py = CPython(major, minor, free)
    assert CPython.parse(str(py)) == py
    assert CPython.parse(py.version) == py


@pytest.mark.parametrize(
    ("tag", "platform"),
    [
        ("manylinux_2_28_x86_64", Platform.LINUX_X86_64),
        ("manylinux1_x86_64", Platform.LINUX_X86_64),
        ("linux_x86_64", Platform.LINUX_X86_64),
        ("manylinux2014_aarch64", Platform.LINUX_AARCH64),
        ("win_amd64", Platform.WINDOWS_AMD64),
        ("macosx_11_0_arm64", None),
        ("win32", None),
    ],
)
def test_platform_from_wheel_tag(tag: str, platform: Platform | None) -> None:
    assert Platform.from_wheel_tag(tag) is platform


def test_empty_document() -> None:
    assert parse_matrix("schema = 1", "m") == MatrixDoc()
    assert Matrix(MatrixDoc()).torch_versions() == ()


def test_the_aarch64_arch_lists_follow_pytorchs_build_script() -> None:
    """PyTorch's ARM CUDA wheels carry no 5.0, 6.0, 7.0, 7.5 or 8.6 (its manywheel script's
    filter_aarch64_archs; .ci/aarch64_linux/aarch64_ci_build.sh: 12.6 is 8.0;9.0, 13.0 adds 11.0 for Thor).
    matrix.toml once gave 7.5 and 8.6 to the aarch64 rows of CUDA 13.0 and 13.2, which plan --github
    handed to ARM build jobs."""
    from librarian.pytorch.releases import Platform

    matrix = load_matrix()
    rows = [a for a in matrix.doc.arch if a.platform is Platform.LINUX_AARCH64]
    assert rows
    for row in rows:
        archs = {a.removesuffix("+PTX") for a in row.arch_list.split(";")}
        assert not archs & {"5.0", "6.0", "7.0", "7.5", "8.6"}, (row.cuda, row.arch_list)
        if row.cuda[0] >= 13:
            assert "11.0" in archs, (row.cuda, row.arch_list)
    assert matrix.arch_list((12, 6), Platform.LINUX_AARCH64, (2, 14)).arch_list == "8.0;9.0"  # type: ignore[union-attr]
