"""Torch and CUDA lines only where the bytes bind them (shared/DESIGN.md: Torch binding): torch-free, stable-ABI and exact wheels.

Three extensions, each a ``.so`` with an sm_89 kernel linking ``libcudart.so.12``: one that needs a
stand-in ``libtorch.so`` and imports only its C shim (``aoti_torch_*``, ``torch_*``: torch's stable ABI),
one that imports a mangled ``_ZN3c10...`` symbol (bound to its torch line), and one that links no torch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import SHT_PROGBITS, cubin_bytes, elf_bytes, fatbin_blob, fatbin_entry

C10 = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"
SHIM = {
    "aoti_torch_empty_strided": False,
    "aoti_torch_get_data_ptr": False,
    "aoti_torch_get_device_type": False,
}
KINDS = {
    "stablek": (("libtorch.so", "libc10.so"), SHIM),
    "exactk": (("libtorch.so", "libc10.so"), {C10: False, "aoti_torch_empty_strided": False}),
    "freek": ((), {}),
}
LINE = ("--torch", "2.9", "--cuda", "12.8")
HERE = ("--sm", "89", "--cuda", "12.8", "--python", "3.12", "--platform", "linux_x86_64")


def extension(needed: tuple[str, ...], symbols: dict[str, bool]) -> bytes:
    blob = fatbin_blob(fatbin_entry(2, 89, cubin_bytes(89, release="12.8")))
    return elf_bytes(
        needed=(*needed, "libcudart.so.12"),
        symbols=symbols,
        sections=((".nv_fatbin", SHT_PROGBITS, blob),),
        flags={".nv_fatbin": 0x2},
    )


def built(tmp_path: Path, name: str, version: str = "1.0") -> Path:
    needed, symbols = KINDS[name]
    members = {f"{name}/__init__.py": b"", f"{name}/_C.so": extension(needed, symbols)}
    return make_wheel(tmp_path / "dist" / name, name, version, "cp312-cp312-linux_x86_64", members)


@pytest.fixture
def store(run: Run, tmp_path: Path) -> Path:
    """The three, built against torch 2.9 + CUDA 12.8, in ./wheelhouse."""
    for name in KINDS:
        assert run("publish", str(built(tmp_path, name)), *LINE).code == 0
    return tmp_path / "wheelhouse"


def test_the_three_kinds_are_told_apart(run: Run, tmp_path: Path) -> None:
    rows = {}
    for name in KINDS:
        out = run("inspect", str(built(tmp_path, name))).out
        rows[name] = next(
            line.split("  ", 2)[-1].strip() for line in out.splitlines() if line.startswith("  torch")
        )
    assert rows["stablek"] == (  # every import in the table: its floor from its bytes, no label needed
        "torch 2.9+ (stable ABI); imports only its C shim: every shim function it imports is in torch 2.9; "
        "links libc10.so libtorch.so"
    )
    said = "c10::detail::torchCheckFail(…)" if shutil.which("c++filt") else C10  # demangled where it can be
    assert rows["exactk"] == f"torch (minor unknown); imports {said}; links libc10.so libtorch.so"
    assert rows["freek"] == "does not link torch"


@pytest.mark.parametrize("torch", ["2.10", "2.11"])
def test_later_torch_lines_get_stable_and_torch_free_wheels_never_exact_ones(
    run: Run, store: Path, torch: str
) -> None:
    for name, why in (
        ("stablek", "stable ABI, needs torch >= 2.9"),
        ("freek", "the wheel does not link torch"),
    ):
        pulled = run("pull", name, "--torch", torch, *HERE, "-o", "out")
        assert pulled.code == 0, pulled
        assert f"{name}/sm89/torch2.9-cu128/" in pulled.out and "(built for torch 2.9, cu128)" in pulled.err
        assert why in pulled.err
    exact = run("pull", "exactk", "--torch", torch, *HERE, "-o", "out", "--json")
    assert exact.code == 1 and all(c["fails"] == ["torch"] for c in json.loads(exact.out)["candidates"])
    assert f"another torch line: 2.9, not {torch}" in exact.err


def test_the_stable_abi_serves_no_older_line_and_no_other_major(
    run: Run, store: Path, tmp_path: Path
) -> None:
    whl = next(store.rglob("stablek-*.whl"))
    for torch, ok in (("2.8", False), ("2.9", True), ("2.12", True), ("3.0", False)):
        report = json.loads(run("doctor", str(whl), "--torch", torch, *HERE, "--json").out)["wheels"][0]
        verdict = next(v for v in report["verdicts"] if v["demand"] == "torch")
        assert verdict["ok"] is ok, (torch, verdict)
        assert not ok or verdict["exact"] is (torch == "2.9")  # a later line runs it, but is not its own
    assert run("pull", "stablek", "--torch", "2.8", *HERE, "-o", "out").code == 1


def test_within_a_version_the_build_for_the_very_line_wins(run: Run, store: Path, tmp_path: Path) -> None:
    assert run("publish", str(built(tmp_path / "b", "freek")), "--torch", "2.10", "--cuda", "12.8").code == 0
    pulled = run("pull", "freek", "--torch", "2.10", *HERE, "-o", "out")
    assert pulled.code == 0 and "freek/sm89/torch2.10-cu128/" in pulled.out and pulled.err == ""
    newer = built(tmp_path / "c", "freek", "1.1")
    assert run("publish", str(newer), *LINE).code == 0
    took = run(
        "pull", "freek", "--torch", "2.10", *HERE, "-o", "out"
    )  # the newest version first, whatever it was built for
    assert took.code == 0 and "freek-1.1+cu128torch2.9" in took.out


def test_gc_keeps_what_serves_a_kept_line_and_the_pages_list_it(
    run: Run, store: Path, tmp_path: Path
) -> None:
    # another package built for torch 2.10 makes 2.10 a line of the store, with a page of its own
    assert (
        run("publish", str(built(tmp_path / "n", "exactk", "2.0")), "--torch", "2.10", "--cuda", "12.8").code
        == 0
    )
    page = (store / "pages/sm89-torch2.10-cu128.html").read_text()
    assert "stablek-1.0+cu128torch2.9" in page and "freek-1.0+cu128torch2.9" in page
    assert "exactk-1.0+cu128torch2.9" not in page and "exactk-2.0+cu128torch2.10" in page
    plan = run("gc", "--keep-torch", "1")
    assert plan.code == 0
    assert "remove  exactk/sm89/torch2.9-cu128/exactk-1.0+cu128torch2.9" in plan.out
    assert (
        "keep  stablek/sm89/torch2.9-cu128/stablek-1.0+cu128torch2.9-cp312-cp312-linux_x86_64.whl  (serves torch 2.10: stable ABI, needs torch >= 2.9"
        in plan.out
    )
    assert (
        "keep  freek/sm89/torch2.9-cu128/freek-1.0+cu128torch2.9-cp312-cp312-linux_x86_64.whl  (serves torch 2.10: the wheel does not link torch; --drop-serving drops it)"
        in plan.out
    )
    assert "; --drop-serving drops it)" in plan.out  # the flag that drops it is named (issue 53, item 6)
    serving = run("gc", "--keep-torch", "1", "--drop-serving", "--json")
    removed = sorted(r["path"].split("/")[0] for r in json.loads(serving.out)["remove"])
    assert serving.code == 0 and removed == ["exactk", "freek", "stablek"], serving.out
    done = run("gc", "--keep-torch", "1", "--yes", "--json")
    assert done.code == 0 and [r["path"].split("/")[0] for r in json.loads(done.out)["remove"]] == ["exactk"]
    assert run("verify", "--deep").code == 0


def test_an_entry_from_an_older_store_counts_as_exact(run: Run, store: Path) -> None:
    shard_path = store / "index/stablek.json"
    shard = json.loads(shard_path.read_text())
    for wheel in shard["wheels"]:
        for binary in wheel["facts"]["binaries"]:
            assert binary.pop("torch_symbols") == []  # written for every member that links torch
    shard_path.write_text(json.dumps(shard, indent=1, sort_keys=True) + "\n")
    refused = run("pull", "stablek", "--torch", "2.10", *HERE, "-o", "out")
    assert refused.code == 1 and "another torch line: 2.9, not 2.10" in refused.err
    assert run("reindex", "--refresh").code == 0  # its bytes read again: stable ABI, as it is
    assert run("pull", "stablek", "--torch", "2.10", *HERE, "-o", "out").code == 0


def test_a_wheel_with_a_build_per_cuda_line_serves_each_line_it_carries(run: Run, tmp_path: Path) -> None:
    def build(line: str) -> bytes:
        blob = fatbin_blob(fatbin_entry(2, 89, cubin_bytes(89, release=line)))
        return elf_bytes(
            needed=(f"libcudart.so.{line.split('.')[0]}",),
            sections=((".nv_fatbin", SHT_PROGBITS, blob),),
            flags={".nv_fatbin": 0x2},
        )

    members = {
        "bnbk/__init__.py": b"",
        **{
            f"bnbk/libbnbk_cuda{line.replace('.', '')}.so": build(line)
            for line in ("11.8", "12.6", "12.8", "13.0")
        },
    }
    whl = make_wheel(tmp_path / "dist", "bnbk", "1.0", "py3-none-manylinux_2_24_x86_64", members)
    assert run("publish", str(whl), *LINE).code == 0
    for cuda, line in (("11.8", "11.8"), ("12.6", "12.6"), ("12.9", "12.8"), ("13.0", "13.0")):
        pulled = run(
            "pull",
            "bnbk",
            "--sm",
            "89",
            "--torch",
            "2.9",
            "--cuda",
            cuda,
            "--python",
            "3.12",
            "--platform",
            "manylinux_2_28_x86_64",
            "-o",
            "out",
        )
        assert pulled.code == 0, (cuda, pulled)
        if cuda != "12.8":
            assert f"carries a CUDA {line} build (libbnbk_cuda{line.replace('.', '')}.so)" in pulled.err


SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"


@pytest.mark.parametrize("torch", ["2.10", "2.11"])
def test_the_sample_kernel_links_no_torch_and_serves_later_lines(run: Run, torch: str) -> None:
    wheels = sorted(str(p) for p in SAMPLES.glob("*.whl"))
    assert run("publish", *wheels, "--torch", "2.9", "--cuda", "13.0").code == 0
    assert "does not link torch" in run("inspect", wheels[0]).out
    pulled = run(
        "pull", "tinykern", "--sm", "89", "--torch", torch, "--cuda", "13.0", "--python", "3.12", "-o", "out"
    )
    assert pulled.code == 0 and "tinykern/sm89/torch2.9-cu130/" in pulled.out
    assert "(built for torch 2.9, cu130): the wheel does not link torch" in pulled.err
