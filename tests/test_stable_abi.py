"""A stable-ABI build's torch floor from the shim functions it imports (issue 45 item 1, issue 52 item 1):
the table as data (the headers of released torch), the floor never above the build line, an import the
table does not know leaving the build line (said so), and publish, pull, doctor, inspect, plan and the
variant properties agreeing on it. ``matrix refresh --shims`` writes a newer table to the user's override.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from librarian.stable_abi import ShimTable, parse_versions_file, stable_floor
from tests.builders import make_wheel
from tests.conftest import Run
from tests.test_torch_lines import extension

OLD = "aoti_torch_empty_strided"  # in torch 2.9's headers
TABLE = ShimTable(
    {OLD: (2, 9), "torch_call_dispatcher": (2, 10), "torch_from_blob": (2, 11), "torch_tag_core": (2, 12)},
    base=(2, 9),
    through=(2, 13),
    source="test",
)
HERE = ("--sm", "89", "--cuda", "12.8", "--python", "3.12", "--platform", "linux_x86_64")


@pytest.mark.parametrize(
    ("imports", "build", "line", "from_bytes", "why"),
    [
        ([OLD], (2, 12), (2, 9), True, "every shim function it imports is in torch 2.9"),
        ([OLD, "torch_from_blob"], (2, 12), (2, 11), True, "torch_from_blob since 2.11"),
        (
            [OLD, "torch_call_dispatcher", "torch_from_blob"],
            (2, 13),
            (2, 11),
            True,
            "torch_from_blob since 2.11",
        ),
        (
            ["torch_tag_core"],
            (2, 10),
            (2, 10),
            True,
            "its own build line, 2.10 (the table says torch_tag_core",
        ),
        (
            ["torch_new_in_2_14"],
            (2, 14),
            (2, 14),
            False,
            "torch_new_in_2_14 is not in librarian's table",
        ),
        ([OLD, "torch_from_blob"], (2, 14), (2, 11), True, "torch_from_blob since 2.11"),
        # an import no table knows, whatever the table's last line: the build line, said so
        (["torch_unknown", OLD], (2, 12), (2, 12), False, "torch_unknown is not in librarian's table"),
        (["torch_from_blob"], (2, 14), (2, 11), True, "torch_from_blob since 2.11"),  # every import listed
        ([OLD, "torch_from_blob"], None, (2, 11), True, "torch_from_blob since 2.11"),  # every import known
        (["torch_unknown", "torch_from_blob"], None, (2, 11), False, "torch_from_blob since 2.11, at least"),
        ([], (2, 12), (2, 9), True, "it imports no shim function newer than torch 2.9"),
    ],
)
def test_the_floor_is_the_newest_import_never_above_the_build_line(
    imports: list[str], build: tuple[int, int] | None, line: tuple[int, int], from_bytes: bool, why: str
) -> None:
    floor = stable_floor(imports, build, TABLE)
    assert floor is not None and floor.line == line and floor.from_bytes is from_bytes
    assert floor.why.startswith(why), floor.why


def test_the_packaged_table_is_released_torchs_headers_with_their_sources() -> None:
    from librarian.stable_abi import load_table

    table = load_table()
    assert table.since["torch_from_blob"] == (2, 11) and table.since["torch_call_dispatcher"] == (2, 10)
    # released 2.13's own headers guard the generator shims (the development list had them nowhere)
    for name in ("torch_new_generator_handle", "torch_delete_generator", "torch_generator_get_device"):
        assert table.since[name] == (2, 13)
    assert table.since["torch_tensor_from_pyobject"] == (2, 14) and table.since[OLD] == (2, 9)
    assert table.base == (2, 9) and table.through >= (2, 15)
    assert "released torch" in table.source and table.sources["2.13"].startswith("torch-2.13.0-")
    with pytest.raises(Exception, match="not 'function_name: TORCH_VERSION_X_Y_Z'"):
        parse_versions_file("torch_x: 2.10\n", "f.txt")


def stable_wheel(tmp_path: Path, name: str, imports: tuple[str, ...]) -> Path:
    so = extension(("libtorch.so", "libc10.so"), dict.fromkeys(imports, False))
    return make_wheel(tmp_path / name, name, "1.0", "cp312-cp312-linux_x86_64", {f"{name}/_C.so": so})


def test_a_build_made_with_212_importing_only_old_functions_serves_29_to_211(
    run: Run, tmp_path: Path
) -> None:
    """Built (labelled) torch 2.12, it imports only functions older than 2.10: pull serves it to 2.9, 2.10
    and 2.11 (it once served 2.12 and later only, and a farm rebuilt what it had); one that imports a 2.11
    function is refused on 2.10, naming the function."""
    old = stable_wheel(tmp_path, "oldshim", (OLD, "aoti_torch_get_data_ptr"))
    new = stable_wheel(tmp_path, "newshim", (OLD, "torch_from_blob"))
    for wheel in (old, new):
        done = run("publish", str(wheel), "--torch", "2.12", "--cuda", "12.8", "--allow-unknown-combo")
        assert done.code == 0, done.err
    for torch in ("2.9", "2.10", "2.11", "2.12"):
        got = run("pull", "oldshim", "--torch", torch, *HERE, "-o", f"o{torch}")
        assert got.code == 0, (torch, got.err)
    got = run("pull", "oldshim", "--torch", "2.10", *HERE, "-o", "o")
    assert "stable ABI, needs torch >= 2.9: every shim function it imports is in torch 2.9" in got.err
    assert run("pull", "newshim", "--torch", "2.11", *HERE, "-o", "n11").code == 0
    refused = run("pull", "newshim", "--torch", "2.10", *HERE, "-o", "n10")
    assert refused.code == 1 and "torch_from_blob since 2.11" in refused.err, refused.err
    doctor = run(
        "doctor", str(next((tmp_path / "wheelhouse").rglob("newshim-*.whl"))), "--torch", "2.10", *HERE
    )
    assert doctor.code == 1 and "needs torch >= 2.11: torch_from_blob since 2.11" in doctor.out, doctor.out
    shown = run("inspect", str(new))  # unlabelled: every import known, the floor they say
    assert "torch 2.11+ (stable ABI); imports only its C shim: torch_from_blob since 2.11;" in shown.out
    unknown = run("inspect", str(stable_wheel(tmp_path, "unknownshim", ("torch_unknown", "torch_from_blob"))))
    assert "torch_from_blob since 2.11, at least: torch_unknown is not in librarian's table" in unknown.out


def test_a_label_below_the_floor_its_bytes_set_is_a_claim(run: Run, tmp_path: Path) -> None:
    """torchao 0.18 imports a shim function first in torch 2.11; filed as +cu128torch2.9 it was served to
    2.9, where it fails to load (undefined symbol). The label is a claim its bytes contradict: refused with
    the function and the flag, filed with --allow-torch-mismatch (kept in the entry); a label at or above
    the floor is no claim."""
    new = stable_wheel(tmp_path, "newshim", (OLD, "torch_from_blob"))
    refused = run("publish", str(new), "--torch", "2.9", "--cuda", "12.8")
    assert refused.code == 2 and "Traceback" not in refused.err
    assert (
        "label says torch 2.9, its bytes need torch >= 2.11: torch_from_blob since 2.11; "
        "pass --allow-torch-mismatch to publish it anyway"
    ) in refused.err, refused.err
    assert not list((tmp_path / "wheelhouse").rglob("*.whl")) if (tmp_path / "wheelhouse").exists() else True
    accepted = run("publish", str(new), "--torch", "2.9", "--cuda", "12.8", "--allow-torch-mismatch")
    assert accepted.code == 0, accepted.err
    shard = next((tmp_path / "wheelhouse" / "index").rglob("*.json")).read_text()
    assert "--allow-torch-mismatch" in shard
    at_floor = stable_wheel(tmp_path, "atfloor", (OLD, "torch_from_blob"))
    done = run("publish", str(at_floor), "--torch", "2.11", "--cuda", "12.8", "--allow-unknown-combo")
    assert done.code == 0, done.err


def test_matrix_refresh_shims_writes_a_newer_table_that_lowers_a_floor(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2.17 build importing a function no table knows keeps its build line; with a newer list read in
    (``matrix refresh --shims FILE``), its floor is that function's line."""
    wheel = stable_wheel(tmp_path, "fresh", (OLD, "torch_new_in_2_16"))
    assert run("publish", str(wheel), "--torch", "2.17", "--cuda", "12.8", "--sm", "89",
               "--allow-unknown-combo").code == 0  # fmt: skip
    machine = ("--sm", "89", "--cuda", "12.8", "--python", "3.12", "--platform", "linux_x86_64")
    before = run("pull", "fresh", "--torch", "2.16", *machine, "-o", "b")
    assert (
        before.code == 1
        and "torch_new_in_2_16 is not in librarian's table (released torch through" in before.err
    ), before.err
    table = tmp_path / "shim_function_versions.txt"
    table.write_text(
        "# newer\ntorch_from_blob: TORCH_VERSION_2_11_0\ntorch_new_in_2_16: TORCH_VERSION_2_16_0\n"
    )
    override = tmp_path / "abi.toml"
    monkeypatch.setenv("LIBRARIAN_STABLE_ABI", str(override))
    done = run("matrix", "refresh", "--shims", str(table))
    assert done.code == 0 and "through torch 2.16" in done.out and override.is_file(), done.out + done.err
    after = run("pull", "fresh", "--torch", "2.16", *machine, "-o", "a")
    assert after.code == 0, after.err
    assert "needs torch >= 2.16: torch_new_in_2_16 since 2.16" in after.err
    bad = run("matrix", "refresh", "--shims", str(tmp_path / "missing.txt"))
    assert bad.code == 2 and bad.err.count("\n") == 1 and "cannot read" in bad.err


MATRIX_216 = """schema = 1

[[torch]]
version = "2.16"
note = "the day it lands"

[[torch.cuda]]
line = "13.0"
status = "stable"
abi = "cxx11"
python = ["cp312"]
platforms = ["linux-x86_64"]
source = "test"
date = 2026-12-22
"""


def test_on_the_day_216_lands_plan_and_ls_say_which_stored_wheels_already_serve_it(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built for torch 2.14: a stable-ABI build (floor 2.11) holds the 2.16 cell by its bytes; an exact one
    needs a build, and plan names it; ``ls --torch 2.16`` lists the one that serves."""
    from tests.cuda_fixtures import SHT_PROGBITS, cubin_bytes, elf_bytes, fatbin_blob, fatbin_entry

    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX_216)
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(matrix))

    def cu13(name: str, symbols: dict[str, bool]) -> Path:
        blob = fatbin_blob(fatbin_entry(2, 89, cubin_bytes(89, release="13.0")))
        so = elf_bytes(needed=("libtorch.so", "libc10.so", "libcudart.so.13"), symbols=symbols,
                       sections=((".nv_fatbin", SHT_PROGBITS, blob),), flags={".nv_fatbin": 0x2})  # fmt: skip
        return make_wheel(tmp_path / name, name, "1.0", "cp312-cp312-linux_x86_64", {f"{name}/_C.so": so})

    stab = cu13("stab", {OLD: False, "torch_from_blob": False})
    exac = cu13("exac", {"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs": False})
    assert run("publish", str(stab), str(exac), "--torch", "2.14", "--cuda", "13.0", "--sm", "89").code == 0
    planned = run("plan", "stab==1.0", "exac==1.0", "--sm", "89", "--torch", "2.16", "--python", "3.12")
    assert planned.code == 0, planned.err
    assert "stab 1.0: 1 cell(s) held, 0 missing" in planned.out
    assert "exac 1.0: 0 cell(s) held, 1 missing in 1 job(s)" in planned.out
    listed = run("ls", "--torch", "2.16")
    assert listed.code == 0 and "stab" in listed.out and "exac" not in listed.out
    assert "1 stored wheel(s) run with torch 2.16 (1 by stable ABI)" in listed.out
    assert run("pull", "stab", "--torch", "2.16", "--sm", "89", "--cuda", "13.0", "--python", "3.12",
               "--platform", "linux_x86_64", "-o", "o").code == 0  # fmt: skip


def test_the_override_is_bounded_like_the_matrix_override(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 54 item 4: a FIFO named by LIBRARIAN_STABLE_ABI is refused, not waited on; versions no torch has
    (5,000 digits, 99999999999999999999) are refused in one line; a copy older than the packaged table is
    refused, nothing written; the count reported is the file's own."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "abi.fifo"
    os.mkfifo(fifo)
    probe = "from librarian.stable_abi import load_table\ntry:\n    load_table()\nexcept Exception as e:\n    print(e)"
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "LIBRARIAN_STABLE_ABI": str(fifo)},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert f"{fifo}: cannot read the stable-ABI table" in done.stdout, done.stdout + done.stderr
    override = tmp_path / "abi.toml"
    monkeypatch.setenv("LIBRARIAN_STABLE_ABI", str(override))
    listing = tmp_path / "shim_function_versions.txt"
    for version in ("2_" + "9" * 5000 + "_0", "99999999999999999999_0_0"):
        listing.write_text(f"torch_new: TORCH_VERSION_{version}\n")
        bad = run("matrix", "refresh", "--shims", str(listing))
        assert bad.code == 2 and bad.err.count("\n") == 1 and "Traceback" not in bad.err, bad.err
        assert len(bad.err) < 400 and not override.exists()
    listing.write_text(
        "torch_from_blob: TORCH_VERSION_2_11_0\n"
    )  # reaches 2.11: the packaged one reaches 2.13
    older = run("matrix", "refresh", "--shims", str(listing))
    assert older.code == 2 and "older than librarian's own table" in older.err and not override.exists()
    listing.write_text("torch_from_blob: TORCH_VERSION_2_11_0\ntorch_new_one: TORCH_VERSION_2_15_0\n")
    done2 = run("matrix", "refresh", "--shims", str(listing), "--json")
    assert done2.code == 0, done2.err
    assert json.loads(done2.out)["functions"] == 2  # the file's own, not the packaged table's


def test_a_213_build_importing_the_generator_shims_is_served_from_213_and_an_unknown_import_from_its_line(
    run: Run, tmp_path: Path
) -> None:
    """Issue 52: released 2.13's headers guard torch_new_generator_handle with 2.13 (the development list
    left it out, and such a build got the floor 2.9); an import no table knows keeps the build line, even
    below the table's last line."""
    gen = stable_wheel(tmp_path, "genshim", (OLD, "torch_new_generator_handle", "torch_delete_generator"))
    odd = stable_wheel(tmp_path, "oddshim", (OLD, "torch_function_no_release_has"))
    for wheel in (gen, odd):
        assert (
            run("publish", str(wheel), "--torch", "2.13", "--cuda", "12.8", "--allow-unknown-combo").code == 0
        )
    refused = run("pull", "genshim", "--torch", "2.12", *HERE, "-o", "g12")
    assert (
        refused.code == 1 and "needs torch >= 2.13: torch_new_generator_handle since 2.13" in refused.err
    ), refused.err
    assert run("pull", "genshim", "--torch", "2.13", *HERE, "-o", "g13").code == 0
    assert run("pull", "genshim", "--torch", "2.15", *HERE, "-o", "g15").code == 0
    unknown = run("pull", "oddshim", "--torch", "2.12", *HERE, "-o", "o12")
    assert unknown.code == 1 and "torch_function_no_release_has is not in librarian's table" in unknown.err
    assert "its own build line, 2.13" in unknown.err
    assert run("pull", "oddshim", "--torch", "2.13", *HERE, "-o", "o13").code == 0
