"""One judgement, every command (shared/DESIGN.md: Which members must run): which members load, what serves the GPU, claims checked once,
overrides remembered, nothing unchecked from the bytes in the index.

The wheels are made of hand-built ELF and fatbin bytes (``tests.cuda_fixtures``) shaped like the real ones
the issue names: bitsandbytes (one library per CUDA line, an Intel XPU library, a CPU-only build),
sgl-kernel (its own extension modules beside a vendored library), libcufftw (a stub cubin with no kernels).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from librarian.coords import GpuArch, WheelName
from librarian.demands import Demand, GpuMatch, Runs, Wheel, cells, claims, judge
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.wheel.binaries import inspect_binary
from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import SHT_PROGBITS, cubin_bytes, elf_bytes, fatbin_blob, fatbin_entry
from tests.demand_builders import machine, so

LABEL = ("--torch", "2.9", "--cuda", "12.8")  # cu128torch2.9: a combo PyTorch shipped


def device_so(
    *sms: int,
    release: str = "12.8",
    needed: tuple[str, ...] = (),
    glibc: str = "GLIBC_2.17",
    pyinit: str | None = None,
    kernels: bool = True,
) -> bytes:
    """A host .so whose fatbin holds one cubin per SM (built by ``release``), needing ``glibc``."""
    blob = fatbin_blob(
        *(fatbin_entry(2, sm, cubin_bytes(sm, release=release, kernels=kernels)) for sm in sms)
    )
    symbols = {pyinit: True} if pyinit else None
    return elf_bytes(
        needed=needed,
        verneed={"libc.so.6": (glibc,)},
        symbols=symbols,
        sections=((".nv_fatbin", SHT_PROGBITS, blob),),
        flags={".nv_fatbin": 0x2},
    )


def host_so(*, needed: tuple[str, ...] = (), glibc: str = "GLIBC_2.17") -> bytes:
    """A host .so with no device code."""
    return elf_bytes(needed=needed, verneed={"libc.so.6": (glibc,)})


# --- which members load ----------------------------------------------------------------------------------


BNB = "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"
BNB_FACTS = WheelFacts(BNB, (
    so("bitsandbytes/libbitsandbytes_cuda128.so", sass="sm_80 sm_89", toolkit=(12, 8), glibc=(2, 17),
       needed=("libcudart.so.12",)),
    so("bitsandbytes/libbitsandbytes_cuda130.so", sass="sm_80 sm_89 sm_120", toolkit=(13, 0), glibc=(2, 17),
       needed=("libcudart.so.13",)),
    so("bitsandbytes/libbitsandbytes_xpu2025.so", glibc=(2, 32), needed=("libsycl.so.8",)),
    so("bitsandbytes/libbitsandbytes_cpu.so", glibc=(2, 34)),
))  # fmt: skip


def test_other_vendors_and_cpu_fallbacks_never_load_on_an_nvidia_machine() -> None:
    j = judge(
        Wheel(WheelName.parse(BNB), BNB_FACTS), machine(sm="89", torch="2.9", cuda="12.8", glibc="2.31")
    )
    assert j.runs is Runs.RUNS, [str(v) for v in j.verdicts if not v.ok]
    assert dict(j.skipped) == {
        "bitsandbytes/libbitsandbytes_xpu2025.so": "for Intel XPU GPUs",
        "bitsandbytes/libbitsandbytes_cpu.so": "the CPU-only build of a CUDA library",
        "bitsandbytes/libbitsandbytes_cuda130.so": "another CUDA line's build",
    }
    assert j.loads == ("bitsandbytes/libbitsandbytes_cuda128.so",) and j.picked == j.loads
    assert j.verdict(Demand.GLIBC).wheel_needs == "GLIBC_2.17"  # not the XPU library's 2.32
    # On CUDA 13.0 the other build loads, and its sm_120 serves a Blackwell GPU natively.
    blackwell = judge(Wheel(WheelName.parse(BNB), BNB_FACTS), machine(sm="120", torch="2.9", cuda="13.0"))
    assert (
        blackwell.native and blackwell.serving is not None and str(blackwell.serving) == "its own sm_120 SASS"
    )


def test_the_label_cuda_claim_counts_only_what_that_line_loads() -> None:
    # bitsandbytes: the cu128 label meets a CUDA 12.8 library; the 13.0 one is another line's build.
    name = WheelName.parse(BNB.replace("0.50.2", "0.50.2+cu128torch2.9"))
    assert claims(Wheel(name, BNB_FACTS)) == ()  # nor does the XPU library's glibc contradict manylinux_2_24
    assert judge(Wheel(name, BNB_FACTS), machine(sm="89", torch="2.9", cuda="12.8")).runs is Runs.RUNS
    lonely = WheelFacts(BNB, BNB_FACTS.binaries[1:2])  # only the CUDA 13.0 build: the label lies
    found = claims(Wheel(name, lonely))
    assert [(c.kind.value, c.flag) for c in found] == [("cuda", "--allow-cuda-mismatch")] * 2
    assert str(found[0]) == "label says CUDA 12.8, device code built by CUDA 13.0"


SGL = "sgl_kernel-0.3.9-cp310-abi3-manylinux2014_x86_64.whl"


@pytest.mark.parametrize("extension", [True, None])  # None: facts from an older index, the name decides
def test_own_extension_modules_decide_over_vendored_libraries(extension: bool | None) -> None:
    own = BinaryFacts(
        "sgl_kernel/common_ops.abi3.so",
        BinaryFormat.ELF,
        "x86_64",
        sass=(GpuArch.parse("sm_90a"), GpuArch.parse("sm_100a")),
        extension=extension,
    )
    vendored = BinaryFacts(
        "sgl_kernel/libflashmla.so",
        BinaryFormat.ELF,
        "x86_64",
        ptx=(GpuArch.parse("compute_80"),),
        extension=False if extension else None,
    )
    wheel = Wheel(WheelName.parse(SGL), WheelFacts(SGL, (own, vendored)))
    on_103 = judge(wheel, machine(sm="103", cuda="12.9", torch="2.8"))
    gpu = on_103.verdict(Demand.GPU)
    assert gpu.ok is False and on_103.runs is Runs.NO and on_103.serving is None
    assert gpu.reason == (
        "sgl_kernel/common_ops.abi3.so has no code for sm_103 "
        "(only libraries it vendors do; its own extension modules decide)"
    )
    on_90 = judge(wheel, machine(sm="90", cuda="12.9", torch="2.8"))
    assert on_90.runs is Runs.RUNS and on_90.native and on_90.serving is not None
    assert on_90.serving.match is GpuMatch.EXACT and str(on_90.serving.arch) == "sm_90a"


def test_an_extension_module_is_told_by_its_pyinit_symbol() -> None:
    module = inspect_binary_bytes(device_so(90, pyinit="PyInit__C"), "pkg/_C.so")
    library = inspect_binary_bytes(device_so(90), "pkg/libk.so")
    assert (module.extension, library.extension) == (True, False)


def inspect_binary_bytes(data: bytes, path: str) -> BinaryFacts:
    import io

    return inspect_binary(io.BytesIO(data), path)


def test_device_code_without_kernels_serves_nothing_and_blocks_nothing() -> None:
    stub = inspect_binary_bytes(device_so(90, kernels=False), "nvidia/cufft/lib/libcufftw.so.11")
    real = inspect_binary_bytes(device_so(90), "nvidia/cufft/lib/libcufft.so.11")
    assert stub.no_kernels and stub.has_device_code and not stub.has_kernels and not real.no_kernels
    name = WheelName.parse("nvidia_cufft_cu12-11.3.3.83-py3-none-manylinux2014_x86_64.whl")
    j = judge(Wheel(name, WheelFacts(str(name), (real, stub))), machine(sm="90", torch="2.9", cuda="12.8"))
    assert j.runs is Runs.RUNS and j.partly == ()  # not "runs, partly (libcufftw.so.11 cannot run here)"
    alone = judge(Wheel(name, WheelFacts(str(name), (stub,))), machine(sm="90"))
    assert alone.verdict(Demand.GPU).ok is True and alone.verdict(Demand.GPU).wheel_needs == "no GPU code"


def test_cells_are_where_the_judgement_runs_natively() -> None:
    name = WheelName.parse("kern-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl")
    facts = WheelFacts(str(name), (so(sass="sm_86", ptx="compute_86"),))
    found = cells(Wheel(name, facts))
    assert [(str(c.sm), c.serving.match) for c in found] == [
        ("sm_86", GpuMatch.EXACT),
        ("sm_89", GpuMatch.SASS),
    ]
    on_90 = judge(Wheel(name, facts), machine(sm="90"))
    assert on_90.runs is Runs.RUNS and not on_90.native  # PTX JIT: runs, but files no cell


# --- end to end: the same answer from every command ---------------------------------------------------------


def bnb_wheel(directory: Path) -> Path:
    members = {
        "bitsandbytes/__init__.py": b"",
        "bitsandbytes/libbitsandbytes_cuda128.so": device_so(80, 89, needed=("libcudart.so.12",)),
        "bitsandbytes/libbitsandbytes_cuda130.so": device_so(
            80, 89, 120, release="13.0", needed=("libcudart.so.13",)
        ),
        "bitsandbytes/libbitsandbytes_xpu2025.so": host_so(needed=("libsycl.so.8",), glibc="GLIBC_2.32"),
    }
    return make_wheel(directory, "bitsandbytes", "0.50.2", "py3-none-manylinux_2_24_x86_64", members)


HERE = ("--python", "3.12", "--platform", "manylinux_2_24_x86_64")


def test_bitsandbytes_gets_one_answer_from_inspect_doctor_publish_verify_and_pull(
    run: Run, tmp_path: Path
) -> None:
    whl = bnb_wheel(tmp_path / "dist")
    seen = run("inspect", str(whl))
    assert seen.code == 0 and "!" not in seen.out, seen.out  # no contradiction: the XPU library never loads
    assert (
        "  - bitsandbytes/libbitsandbytes_xpu2025.so: never loads on an NVIDIA machine (for Intel XPU GPUs)"
        in seen.out
    )
    doctor = run(
        "doctor", str(whl), "--sm", "89", *LABEL, *HERE, "--glibc", "2.31", "--driver", "12.8", "--json"
    )
    report = json.loads(doctor.out)["wheels"][0]
    assert doctor.code == 0 and report["runs"] is True and report["native"] is True, report
    assert report["serving"] == {"arch": "sm_89", "how": "exact"}
    published = run("publish", str(whl), *LABEL)  # the cu128 label: the CUDA 12.8 build loads, and is 12.8's
    assert published.code == 0, published.err
    assert "bitsandbytes/sm89/torch2.9-cu128/" in published.out and "sm120" not in published.out
    assert run("verify", "--deep").code == 0
    pulled = run("pull", "bitsandbytes", "--sm", "89", *LABEL, *HERE, "-o", "out")
    assert pulled.code == 0 and pulled.err == "", pulled


def test_overrides_are_remembered_and_verify_accepts_them(run: Run, tmp_path: Path) -> None:
    members = {"kern/_C.so": device_so(89, glibc="GLIBC_2.28")}
    whl = make_wheel(tmp_path / "dist", "kern", "1.0", "cp312-cp312-manylinux_2_17_x86_64", members)
    refused = run("publish", str(whl), *LABEL)
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert refused.err.endswith("; pass --allow-glibc-mismatch to publish it anyway\n")
    assert (
        str(whl.name) in refused.err and "librarian-publish-" not in refused.err
    )  # the user's file, never a temp
    assert not (tmp_path / "wheelhouse").exists()
    assert run("publish", str(whl), *LABEL, "--allow-glibc-mismatch").code == 0
    shard = json.loads((tmp_path / "wheelhouse/index/kern.json").read_text())
    assert shard["schema"] == 2 and [w["overrides"] for w in shard["wheels"]] == [["--allow-glibc-mismatch"]]
    deep = run("verify", "--deep", "--json")
    data = json.loads(deep.out)
    assert deep.code == 0 and data["ok"] is True and data["problems"] == []
    assert [a["flag"] for a in data["accepted"]] == ["--allow-glibc-mismatch"]
    assert "promises glibc 2.17" in data["accepted"][0]["finding"]
    text = run("verify", "--deep").out
    assert (
        "accepted at publish (--allow-glibc-mismatch): platform manylinux_2_17_x86_64 promises glibc 2.17"
        in text
    )


def test_a_corrupt_arch_field_is_a_finding_and_nothing_is_written(run: Run, tmp_path: Path) -> None:
    blob = fatbin_blob(fatbin_entry(2, 2197815386, cubin_bytes(89, release="12.8")))
    bad = elf_bytes(sections=((".nv_fatbin", SHT_PROGBITS, blob),), flags={".nv_fatbin": 0x2})
    whl = make_wheel(tmp_path / "dist", "kern", "1.0", "cp312-cp312-linux_x86_64", {"kern/_C.so": bad})
    for command in (("inspect", str(whl)), ("publish", str(whl), *LABEL, "--sm", "89")):
        result = run(*command)
        assert result.code == 2 and result.err.count("\n") == 1, result
        assert "kern/_C.so" in result.err and "names arch 2197815386, which no compiler emits" in result.err
    assert not (tmp_path / "wheelhouse").exists()


def _shard(store: Path, package: str) -> dict:  # type: ignore[type-arg]
    return json.loads((store / f"index/{package}.json").read_text())  # type: ignore[no-any-return]


def test_one_bad_entry_poisons_only_itself_and_reindex_repairs_it(run: Run, tmp_path: Path) -> None:
    for version in ("1.0", "1.1"):
        whl = make_wheel(
            tmp_path / "dist", "kern", version, "cp312-cp312-linux_x86_64", {"kern/_C.so": device_so(89)}
        )
        assert run("publish", str(whl), *LABEL).code == 0
    store = tmp_path / "wheelhouse"
    shard = _shard(store, "kern")
    newest = next(w for w in shard["wheels"] if "1.1+" in w["path"])
    newest["facts"]["binaries"][0]["sass"] = ["sm_2197815386"]  # as an older librarian stored a corrupt field
    (store / "index/kern.json").write_text(json.dumps(shard, indent=1, sort_keys=True) + "\n")
    pulled = run(
        "pull", "kern", "--sm", "89", *LABEL, "--python", "3.12", "--platform", "linux_x86_64", "-o", "out"
    )
    assert pulled.code == 0 and "kern-1.0+" in pulled.out  # the rest of the package stays pullable
    assert "skipped an index entry" in pulled.err and newest["path"] in pulled.err
    listed = run("ls", "kern")
    assert listed.code == 0 and "Traceback" not in listed.err
    found = run("verify")
    assert found.code == 1 and f"{newest['path']}: index entry fails its checks" in found.out
    assert found.out.count(newest["path"]) == 1  # named once, not also "not in the index"
    repaired = run("reindex")
    assert repaired.code == 0 and f"   repaired  {newest['path']}" in repaired.out, repaired.out
    assert run("verify", "--deep").code == 0
    again = run(
        "pull", "kern", "--sm", "89", *LABEL, "--python", "3.12", "--platform", "linux_x86_64", "-o", "out"
    )
    assert again.code == 0 and "kern-1.1+" in again.out and again.err == ""


def test_reindex_refresh_brings_an_older_store_up_to_date(run: Run, tmp_path: Path) -> None:
    whl = make_wheel(
        tmp_path / "dist",
        "kern",
        "1.0",
        "cp312-cp312-linux_x86_64",
        {"kern/_C.so": device_so(89, pyinit="PyInit__C")},
    )
    assert run("publish", str(whl), *LABEL).code == 0
    store = tmp_path / "wheelhouse"
    shard = _shard(store, "kern")
    assert shard["wheels"][0]["facts"]["binaries"][0]["extension"] is True
    old = dict(shard, schema=1)  # what librarian wrote before this version: no extension fact
    for wheel in old["wheels"]:
        for b in wheel["facts"]["binaries"]:
            del b["extension"]
    (store / "index/kern.json").write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
    root = json.loads((store / "index.json").read_text())
    root["packages"]["kern"]["sha256"] = hashlib.sha256((store / "index/kern.json").read_bytes()).hexdigest()
    (store / "index.json").write_text(json.dumps(dict(root, schema=1), indent=1, sort_keys=True) + "\n")
    assert run("verify").code == 0  # an older store reads as it is, and stays as it is
    dry = run("reindex", "--refresh", "--dry-run")
    assert dry.code == 0 and "would refresh" in dry.out and _shard(store, "kern")["schema"] == 1
    done = run("reindex", "--refresh")
    assert done.code == 0 and "refreshed" in done.out, done.out
    fresh = _shard(store, "kern")
    assert fresh["schema"] == 2 and fresh["wheels"][0]["facts"]["binaries"][0]["extension"] is True
    assert fresh["wheels"][0]["added"] == shard["wheels"][0]["added"]  # what only the entry knew is kept
    assert "nothing to reindex" in run("reindex", "--refresh").out  # nothing changed since: nothing written


def test_retag_warns_where_its_label_contradicts_the_bytes(run: Run, tmp_path: Path) -> None:
    whl = make_wheel(
        tmp_path / "dist",
        "kern",
        "1.0",
        "cp312-cp312-linux_x86_64",
        {"kern/_C.so": device_so(89, release="13.0", needed=("libcudart.so.13",))},
    )
    result = run("retag", str(whl), "--cuda", "12.8", "--torch", "2.9", "-o", "out", "--json")
    assert result.code == 0, result.err
    (done,) = json.loads(result.out)["wheels"]
    assert [(c["kind"], c["flag"]) for c in done["claims"]] == [("cuda", "--allow-cuda-mismatch")] * 2
    assert (
        "label says CUDA 12.8, device code built by CUDA 13.0 (publish refuses it without --allow-cuda-mismatch)"
        in result.err
    )
    fine = run("retag", str(whl), "--cuda", "13.0", "--torch", "2.9", "-o", "out2")
    assert fine.code == 0 and fine.err == "", fine.err


def test_publish_reads_a_relabelled_wheel_once(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from librarian.wheel import OpenedWheel

    def second_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the relabel already inspected every native member")

    first_read = OpenedWheel.deep
    monkeypatch.setattr(OpenedWheel, "deep", second_read)
    whl = make_wheel(
        tmp_path / "dist", "kern", "1.0", "cp312-cp312-linux_x86_64", {"kern/_C.so": device_so(89)}
    )
    result = run("publish", str(whl), *LABEL)
    assert result.code == 0 and "kern/sm89/torch2.9-cu128/" in result.out, result.err
    monkeypatch.setattr(OpenedWheel, "deep", first_read)  # verify reads the stored copy: its own deep pass
    assert run("verify", "--deep").code == 0


def test_publish_parses_each_wheels_central_directory_once(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check of METADATA and WHEEL, the relabel (or the deep read of a labelled wheel) share one parse of
    the member list: for 70,000 members a second parse took a second of publish's five."""
    import zipfile

    from librarian.wheel import wheelfile

    parsed: list[str] = []

    class Counting(zipfile.ZipFile):
        def __init__(self, file: Any, *args: Any, **kwargs: Any) -> None:
            parsed.append(Path(getattr(file, "name", "")).name)
            super().__init__(file, *args, **kwargs)

    so = {"kern/_C.so": device_so(89)}
    fresh = make_wheel(tmp_path / "dist", "kern", "1.0", "cp312-cp312-linux_x86_64", so)
    labelled = make_wheel(tmp_path / "lab", "kern", "2.0+cu128torch2.9", "cp312-cp312-linux_x86_64", so)
    monkeypatch.setattr(wheelfile.zipfile, "ZipFile", Counting)  # zipfile's own: every reader counts
    assert run("publish", str(fresh), *LABEL).code == 0
    assert parsed == [fresh.name]  # relabelled: the staged copy's directory comes from its writer
    parsed.clear()
    assert run("publish", str(labelled), *LABEL).code == 0
    assert parsed == [labelled.name]


def test_a_stub_with_a_kernel_less_cubin_and_an_empty_ptx_serves_nothing_and_blocks_nothing() -> None:
    """cudss's commlayer/mtlayer: an 872-byte cubin with no kernel beside an empty PTX (issue 45 item 2).
    The PTX was never probed, so the member counted as device code: 'runs, partly' on older drivers."""
    empty_ptx = (
        b"//\\n// Generated by NVIDIA NVVM Compiler\\n.version 8.8\\n.target sm_90\\n.address_size 64\\n"
    )
    blob = fatbin_blob(
        fatbin_entry(2, 90, cubin_bytes(90, release="12.9", kernels=False)), fatbin_entry(1, 90, empty_ptx)
    )
    data = elf_bytes(verneed={"libc.so.6": ("GLIBC_2.17",)}, sections=((".nv_fatbin", SHT_PROGBITS, blob),),
                     flags={".nv_fatbin": 0x2})  # fmt: skip
    stub = inspect_binary_bytes(data, "nvidia/cu12/lib/libcudss_commlayer_nccl.so.0")
    assert stub.no_kernels and stub.has_device_code and not stub.has_kernels
    real = inspect_binary_bytes(device_so(90), "nvidia/cu12/lib/libcudss.so.0")
    name = WheelName.parse("nvidia_cudss_cu12-0.7.1-py3-none-manylinux_2_27_x86_64.whl")
    j = judge(
        Wheel(name, WheelFacts(str(name), (real, stub))),
        machine(sm="90", torch="2.9", cuda="12.8", driver="12.8"),
    )
    assert j.runs is Runs.RUNS and j.partly == (), j
    kernel_ptx = empty_ptx + b".visible .entry _Z1kPi(\\n.param .u64 p\\n)\\n{\\nret;\\n}\\n"
    with_kernel = fatbin_blob(
        fatbin_entry(2, 90, cubin_bytes(90, release="12.9", kernels=False)), fatbin_entry(1, 90, kernel_ptx)
    )
    data = elf_bytes(verneed={"libc.so.6": ("GLIBC_2.17",)}, sections=((".nv_fatbin", SHT_PROGBITS, with_kernel),),
                     flags={".nv_fatbin": 0x2})  # fmt: skip
    assert not inspect_binary_bytes(data, "kern/_C.so").no_kernels  # a PTX kernel is code
