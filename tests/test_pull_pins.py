"""``pull NAME<specifier>``: the newest stored version a PEP 440 specifier admits (issue 44, item 3).

The specifier was once folded into the package name (``cupy_cuda13x==14_2_0: not in the store at all``).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Run

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))
MACHINE = ("--sm", "89", "--torch", "2.9", "--python", "3.12", "--platform", "linux_x86_64")


def test_a_pin_picks_the_stored_version_it_admits_and_a_miss_says_what_is_stored(
    run: Run, tmp_path: Path
) -> None:
    assert run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0").code == 0
    for pin in ("tinykern==0.1.0", "tinykern~=0.1", "tinykern>=0.1,<1", "TinyKern==0.1.*"):
        got = run("pull", pin, *MACHINE, "-o", "out")
        assert got.code == 0, (pin, got.err)
        assert "tinykern-0.1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl" in got.out
    missed = run("pull", "tinykern>=0.2", *MACHINE, "-o", "out2")
    assert missed.code == 1
    assert "tinykern: no wheel in" in missed.err
    assert "note: no stored version matches >=0.2 (stored: 0.1.0)" in missed.err
    assert "not in the store at all" not in missed.err
    bad = run("pull", "tinykern[extra]", *MACHINE)
    assert bad.code == 2 and "no URL, extras or markers" in bad.err and bad.err.count("\n") == 1


def test_a_pin_with_the_label_pulls_the_labelled_wheel_and_another_label_does_not(
    run: Run, tmp_path: Path
) -> None:
    """Issue 53, item 2: PEP 440's ``==`` with a local label matches that labelled wheel (it said "no stored
    version matches" of exactly the stored wheel's version); ``==X`` any label of X; an unlabelled wheel is
    named by the label its cell's path claims."""
    assert run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0").code == 0
    got = run("pull", "tinykern==0.1.0+cu130torch2.9", *MACHINE, "-o", "out")
    assert got.code == 0 and "tinykern-0.1.0+cu130torch2.9-" in got.out, got.err
    other = run("pull", "tinykern==0.1.0+cu128torch2.9", *MACHINE, "-o", "out2")
    assert other.code == 1 and "no stored version matches ==0.1.0+cu128torch2.9" in other.err
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "tinykern" / "sm89" / "torch2.9-cu130").mkdir(parents=True)
    cp312 = next(p for p in SAMPLES if "cp312" in p.name)  # the samples carry no label
    (plain / "tinykern" / "sm89" / "torch2.9-cu130" / cp312.name).write_bytes(cp312.read_bytes())
    assert run("reindex", "--adopt", "--repo", str(plain)).code == 0
    pinned = run("pull", "tinykern==0.1.0+cu130torch2.9", *MACHINE, "--repo", str(plain), "-o", "out3")
    assert pinned.code == 0, pinned.err


def test_ls_of_a_package_the_store_does_not_hold_says_so(run: Run) -> None:
    assert run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0").code == 0
    result = run("ls", "nosuchpkg")
    assert result.code == 1
    assert (
        result.err == "librarian: error: nosuchpkg: not in wheelhouse ('librarian ls' lists what it holds)\n"
    )
    assert run("ls", "tinykern").code == 0


def test_a_package_whose_wheels_link_no_torch_is_pulled_into_a_venv_without_torch(
    run: Run, tmp_path: Path
) -> None:
    """Issue 44 item 3: ``pull tinykern`` for a target without torch demanded ``--torch`` (and said "no torch
    installed here" of the target as if of this machine). A wheel that links torch still needs a line: the
    miss names the target and the flag."""
    import subprocess
    import sys

    from tests.builders import HERE_CP, HERE_TAG, make_wheel, torch_extension_so

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    assert run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0").code == 0
    ext = make_wheel(tmp_path / "t", "withtorch", "1.0", HERE_TAG,
                     {"withtorch/_C.so": torch_extension_so()})  # fmt: skip
    assert run("publish", str(ext), "--torch", "2.9", "--cuda", "13.0", "--sm", "89", "--trust-sm").code == 0
    got = run("pull", "tinykern", "--python", python, "--sm", "89", "-o", "out")
    assert got.code == 0, got.err
    assert (tmp_path / "out" / f"tinykern-0.1.0+cu130torch2.9-{HERE_TAG}.whl").is_file()  # a sample's Python
    missed = run("pull", "withtorch", "--python", python, "--sm", "89", "-o", "out2")
    assert missed.code == 1, missed.err
    assert f"withtorch: no wheel in wheelhouse for sm89, no torch, {HERE_CP}" in missed.err
    assert "it links torch" in missed.err and "pass --torch" in missed.err, missed.err
    assert python in missed.err or "target" in missed.err, missed.err


def test_near_misses_are_this_platforms_and_the_others_are_counted(run: Run, tmp_path: Path) -> None:
    """Issue 53, item 6: pull's near misses for a Linux x86_64 machine listed every aarch64 and Windows
    wheel of the package; they are this OS and CPU's, with one line for the rest (--json keeps them all)."""
    import json

    from tests.builders import make_wheel
    from tests.cuda_fixtures import SHT_PROGBITS, cubin_bytes, elf_bytes, fatbin_blob, fatbin_entry

    def built(cpu: str, machine: int) -> Path:
        blob = fatbin_blob(fatbin_entry(2, 80, cubin_bytes(80, release="13.0")))
        so = elf_bytes(machine=machine, needed=("libcudart.so.13",), sections=((".nv_fatbin", SHT_PROGBITS, blob),),
                       flags={".nv_fatbin": 0x2})  # fmt: skip
        return make_wheel(tmp_path / cpu, "armkern", "1.0", f"cp312-cp312-linux_{cpu}", {"armkern/_C.so": so})

    for cpu, machine in (("x86_64", 62), ("aarch64", 183)):
        assert run("publish", str(built(cpu, machine)), "--torch", "2.9", "--cuda", "13.0").code == 0, cpu
    missed = run("pull", "armkern", "--sm", "90", "--torch", "2.9", "--python", "3.12", "--platform",
                 "manylinux_2_28_x86_64", "-o", "o")  # fmt: skip
    assert missed.code == 1
    listed = [x for x in missed.err.splitlines() if x.startswith("  armkern-")]
    assert listed and all("linux_x86_64" in x for x in listed), missed.err
    assert "  armkern: 1 more for other platforms (linux-aarch64); --json lists them" in missed.err
    data = run("pull", "armkern", "--sm", "90", "--torch", "2.9", "--python", "3.12", "--platform",
               "manylinux_2_28_x86_64", "-o", "o", "--json")  # fmt: skip
    assert any("aarch64" in c["path"] for c in json.loads(data.out)["candidates"]), data.out
