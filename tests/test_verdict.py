"""Every rule of librarian.verdict against explicit machines: no probing, no GPU needed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from librarian.coords import ArchKind, GpuArch, WheelName
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.machine import Machine, Probed, TorchInfo
from librarian.verdict import (
    DRIVER_TOO_OLD,
    NO_KERNEL_IMAGE,
    PTX_TOO_NEW,
    Demand,
    GpuMatch,
    Verdict,
    gpu_match,
    judge,
    rank,
    runs_on,
)

NAME = "kern-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl"


def arch(text: str) -> GpuArch:
    return GpuArch.parse(text)


def so(path: str = "kern/_C.so", **kw: object) -> BinaryFacts:
    kw.setdefault("cpu", "x86_64")
    for key in ("sass", "ptx"):
        kw[key] = tuple(sorted(arch(a) for a in str(kw.get(key, "")).split()))
    return BinaryFacts(path, kw.pop("format", BinaryFormat.ELF), **kw)  # type: ignore[arg-type]


def wheel(*binaries: BinaryFacts, name: str = NAME) -> WheelFacts:
    return WheelFacts(name, binaries)


def machine(
    sm: str | None = "89",
    driver: str | None = "12.8",
    torch: str | None = "2.8",
    cuda: str | None = "12.8",
    python: str = "3.12",
    glibc: str = "2.35",
    cpu: str = "x86_64",
    os: str = "linux",
    glibcxx: tuple[int, ...] | None = (3, 4, 30),
) -> Machine:
    base = Machine(
        cpu=Probed.found(cpu, "test"),
        os=Probed.found(os, "test"),
        glibcxx=Probed.found(glibcxx, "test") if glibcxx else Probed.unknown("libstdc++.so.6 not found"),
    )
    return base.with_overrides(sm=sm, driver=driver, torch=torch, cuda=cuda, python=python, glibc=glibc)


def verdict_for(demand: Demand, facts: WheelFacts, m: Machine, name: str = NAME) -> Verdict:
    verdicts = judge(facts, WheelName.parse(name), m)
    assert [v.demand for v in verdicts] == list(Demand)
    return next(v for v in verdicts if v.demand is demand)


# --- GPU ----------------------------------------------------------------------------------------------------

GPU_CASES = [
    # sass, ptx, toolkit, machine sm, driver, ok, what the reason or error names
    ("sm_86", "", None, "89", "12.8", True, "sm_86"),
    ("sm_80 sm_86", "", None, "89", "12.8", True, "sm_86"),
    ("sm_90", "", None, "89", "12.8", False, NO_KERNEL_IMAGE),
    ("", "compute_80", (12, 8), "89", "12.8", True, "compute_80"),
    ("", "compute_80", (12, 8), "89", "12.4", False, PTX_TOO_NEW),
    ("", "compute_80", (12, 8), "89", None, True, "--driver"),
    ("", "compute_90", (12, 8), "89", "12.8", False, NO_KERNEL_IMAGE),
    ("sm_90a", "", None, "90", "12.8", True, "sm_90a"),
    ("sm_90a", "", None, "100", "12.8", False, NO_KERNEL_IMAGE),
    ("sm_90a", "", None, "91", "12.8", False, NO_KERNEL_IMAGE),
    ("sm_100f", "", None, "103", "12.9", True, "sm_100f"),
    ("sm_100f", "", None, "120", "12.9", False, NO_KERNEL_IMAGE),
    ("sm_120", "", None, "121", "12.9", True, "sm_120"),
    ("sm_120a", "", None, "121", "12.9", False, NO_KERNEL_IMAGE),
    ("sm_80", "", None, "120", "12.8", False, NO_KERNEL_IMAGE),  # SASS never crosses a major
    ("sm_80", "compute_80", None, "120", "12.8", True, "compute_80"),
]


@pytest.mark.parametrize(("sass", "ptx", "toolkit", "sm", "driver", "ok", "names"), GPU_CASES)
def test_gpu_rules(
    sass: str, ptx: str, toolkit: tuple[int, int] | None, sm: str, driver: str | None, ok: bool, names: str
) -> None:
    v = verdict_for(Demand.GPU, wheel(so(sass=sass, ptx=ptx, toolkit=toolkit)), machine(sm=sm, driver=driver))
    assert v.ok is ok, v
    assert names in (v.reason + v.predicted_error + v.wheel_needs)
    assert (v.predicted_error == "") is ok


def test_gpu_mismatch_prints_like_the_style_guide() -> None:
    v = verdict_for(Demand.GPU, wheel(so(sass="sm_90a")), machine(sm="89"))
    assert str(v) == "GPU arch: wheel needs sm_90a, machine has sm_89"
    assert v.predicted_error == NO_KERNEL_IMAGE


def test_every_device_so_must_serve_the_gpu() -> None:
    facts = wheel(so("kern/a.so", sass="sm_89"), so("kern/b.so", sass="sm_90"), so("kern/host.so"))
    v = verdict_for(Demand.GPU, facts, machine(sm="89"))
    assert v.ok is False
    assert "kern/b.so" in v.reason and "no kernel image" in v.predicted_error


def test_ptx_toolkit_falls_back_to_the_label() -> None:
    # No toolkit in the facts: the label's CUDA 12.8 is the best guess for the PTX's toolkit.
    v = verdict_for(Demand.GPU, wheel(so(ptx="compute_80")), machine(sm="89", driver="12.6"))
    assert v.ok is False and v.predicted_error == PTX_TOO_NEW


def test_gpu_without_device_code_passes_and_unknown_gpu_says_which_flag() -> None:
    assert verdict_for(Demand.GPU, wheel(so()), machine(sm=None)).ok is True
    v = verdict_for(Demand.GPU, wheel(so(sass="sm_89")), machine(sm=None))
    assert v.ok is None and v.reason == "no GPU found; pass --sm" and v.machine_has == "unknown"


def test_relocatable_only_code_does_not_run() -> None:
    facts = wheel(so(relocatable_sass=(arch("sm_89"),)))
    v = verdict_for(Demand.GPU, facts, machine(sm="89"))
    assert v.ok is False and "relocatable" in v.reason


RUNS_ON = [
    ("sm_86", (8, 9), None, None, True),
    ("sm_89", (8, 6), None, None, False),
    ("sm_90a", (9, 0), None, None, True),
    ("sm_90a", (10, 0), None, None, False),
    ("sm_100f", (10, 3), None, None, True),
    ("sm_100f", (10, 0), None, None, True),
    ("sm_103f", (10, 0), None, None, False),
    ("compute_80", (12, 0), None, None, True),
    ("compute_80", (8, 9), (12, 4), (12, 8), False),
    ("compute_80", (8, 9), (12, 8), (12, 8), True),
    ("compute_90a", (9, 0), None, None, True),
    ("compute_90a", (10, 0), None, None, False),
    ("lto_89", (8, 9), None, None, False),
]


@pytest.mark.parametrize(("code", "cap", "driver", "toolkit", "ok"), RUNS_ON)
def test_runs_on(
    code: str, cap: tuple[int, int], driver: tuple[int, int] | None, toolkit: tuple[int, int] | None, ok: bool
) -> None:
    assert runs_on(arch(code), cap, driver, toolkit) is ok


def test_runs_on_exact_suffix_for_suffixed_cells() -> None:
    assert runs_on(arch("sm_90a"), (9, 0), exact_suffix="a")
    assert not runs_on(arch("sm_90"), (9, 0), exact_suffix="a")


def test_gpu_match_prefers_exact_then_sass_then_ptx() -> None:
    assert gpu_match([arch("sm_80"), arch("sm_89")], (8, 9)) == (GpuMatch.EXACT, arch("sm_89"))
    assert gpu_match([arch("sm_80"), arch("sm_86")], (8, 9)) == (GpuMatch.SASS, arch("sm_86"))
    assert gpu_match([arch("compute_80")], (8, 9)) == (GpuMatch.PTX, arch("compute_80"))
    assert gpu_match([arch("sm_90")], (8, 9)) is None


def test_rank_orders_exact_sass_ptx_then_newest() -> None:
    candidates = [
        ("ptx-new", ["compute_80"], "3.0"),
        ("sass-old", ["sm_86"], "1.0"),
        ("exact-old", ["sm_89"], "1.0"),
        ("exact-new", ["sm_89", "compute_89"], "2.0"),
        ("sass-closer", ["sm_80", "sm_87"], "1.0"),
        ("wrong", ["sm_90"], "9.0"),
    ]
    ranked = rank(candidates, lambda c: [arch(a) for a in c[1]], lambda c: Version(c[2]), (8, 9))
    assert [c[0] for c, _ in ranked] == ["exact-new", "exact-old", "sass-closer", "sass-old", "ptx-new"]
    assert ranked[-1][1] is GpuMatch.PTX


# --- CUDA ---------------------------------------------------------------------------------------------------

CUDA_CASES = [
    # wheel label, needed, torch cuda, driver, ok, what the reason or error names
    ("cu128torch2.8", (), "12.8", "12.8", True, ""),
    ("cu126torch2.8", (), "12.8", "12.8", True, "minor-version"),
    ("cu128torch2.8", (), "12.6", "12.8", False, "newer CUDA runtime"),
    ("cu118torch2.8", (), "12.8", "12.8", False, "libcudart.so.11"),
    ("cu128torch2.8", ("libcudart.so.11.0",), "12.8", "12.8", False, "libcudart.so.11.0"),
    ("cu128torch2.8", (), "12.8", "11.8", False, DRIVER_TOO_OLD),
    ("cu128torch2.8", (), "12.8", "12.0", True, ""),  # minor-version compatibility of the driver
    ("cu128torch2.8", (), None, "12.8", None, "--cuda"),
]


@pytest.mark.parametrize(("label", "needed", "cuda", "driver", "ok", "names"), CUDA_CASES)
def test_cuda_rules(
    label: str, needed: tuple[str, ...], cuda: str | None, driver: str, ok: bool | None, names: str
) -> None:
    name = f"kern-1.0+{label}-cp312-cp312-linux_x86_64.whl"
    m = machine(cuda=cuda, driver=driver, torch=None if cuda is None else "2.8")
    v = verdict_for(Demand.CUDA, wheel(so(sass="sm_89", needed=needed), name=name), m, name)
    assert v.ok is ok, v
    assert names in v.reason + v.predicted_error


def test_cuda_not_needed_by_a_plain_wheel() -> None:
    name = "kern-1.0-cp312-cp312-linux_x86_64.whl"
    assert verdict_for(Demand.CUDA, wheel(so(), name=name), machine(cuda=None, torch=None), name).ok is True


# --- torch --------------------------------------------------------------------------------------------------


def test_torch_minor_must_match() -> None:
    facts = wheel(so(sass="sm_89", needed=("libc10.so",), torch_symbols=("_ZN3c104Half3fooEv",)))
    assert verdict_for(Demand.TORCH, facts, machine(torch="2.8")).ok is True
    v = verdict_for(Demand.TORCH, facts, machine(torch="2.9"))
    assert v.ok is False and str(v) == "torch: wheel needs torch 2.8, machine has torch 2.9"
    assert v.predicted_error == "undefined symbol: _ZN3c104Half3fooEv"


def test_torch_symbols_checked_against_exports() -> None:
    facts = wheel(so(needed=("libc10.so",), torch_symbols=("_ZN3c103fooEv", "_ZN3c103barEv")))
    info = TorchInfo("2.8.0+cu128", (12, 8), True, None, exports=frozenset({"_ZN3c103fooEv"}))
    m = replace(machine(), torch=Probed.found(info, "test"))
    v = verdict_for(Demand.TORCH, facts, m)
    assert v.ok is False and v.predicted_error == "undefined symbol: _ZN3c103barEv"
    info_all = replace(info, exports=frozenset({"_ZN3c103fooEv", "_ZN3c103barEv"}))
    assert verdict_for(Demand.TORCH, facts, replace(m, torch=Probed.found(info_all, "test"))).ok is True


def test_torch_cxx11_abi_from_a_flash_attn_label() -> None:
    name = "flash_attn-2.8.3+cu12torch2.8cxx11abiFALSE-cp312-cp312-linux_x86_64.whl"
    info = TorchInfo("2.8.0+cu128", (12, 8), True)
    m = replace(machine(), torch=Probed.found(info, "test"))
    v = verdict_for(Demand.TORCH, wheel(so(needed=("libc10.so",)), name=name), m, name)
    assert v.ok is False and "cxx11abi" in v.reason


def test_torch_unknown_and_not_needed() -> None:
    v = verdict_for(Demand.TORCH, wheel(so(needed=("libc10.so",))), machine(torch=None, cuda=None))
    assert v.ok is None and "--torch" in v.reason
    plain = "kern-1.0-cp312-cp312-linux_x86_64.whl"
    assert verdict_for(Demand.TORCH, wheel(so(), name=plain), machine(torch=None), plain).ok is True
    unlabelled = verdict_for(Demand.TORCH, wheel(so(needed=("libc10.so",)), name=plain), machine(), plain)
    assert unlabelled.ok is None and "retag" in unlabelled.reason


# --- Python, CPU, OS, glibc ---------------------------------------------------------------------------------

PYTHON_CASES = [
    ("cp312-cp312-linux_x86_64", "3.12", True, ""),
    ("cp312-cp312-manylinux_2_28_x86_64", "3.12", True, ""),
    ("cp39-abi3-manylinux_2_17_x86_64", "3.12", True, ""),
    ("cp312-cp312-linux_x86_64", "3.11", False, "not a supported wheel"),
    ("cp312-cp312-manylinux_2_39_x86_64", "3.12", False, "no platform tag"),
    ("cp312-cp312-linux_aarch64", "3.12", False, "no platform tag"),
]


@pytest.mark.parametrize(("tags", "python", "ok", "names"), PYTHON_CASES)
def test_python_tags(tags: str, python: str, ok: bool, names: str) -> None:
    name = f"kern-1.0+cu128torch2.8-{tags}.whl"
    v = verdict_for(Demand.PYTHON, wheel(name=name), machine(python=python), name)
    assert v.ok is ok, v
    assert names in v.reason + v.predicted_error


def test_python_tags_unknown() -> None:
    v = verdict_for(Demand.PYTHON, wheel(), replace(machine(), python_tags=Probed.unknown("pass --python")))
    assert v.ok is None


@pytest.mark.parametrize(
    ("wheel_cpu", "machine_cpu", "ok", "error"),
    [
        ("x86_64", "x86_64", True, ""),
        ("x86_64", "AMD64", True, ""),
        ("aarch64", "arm64", True, ""),
        ("aarch64", "x86_64", False, "cannot open shared object file"),
        ("i686", "x86_64", False, "wrong ELF class: ELFCLASS32"),
    ],
)
def test_cpu(wheel_cpu: str, machine_cpu: str, ok: bool, error: str) -> None:
    v = verdict_for(Demand.CPU, wheel(so(cpu=wheel_cpu)), machine(cpu=machine_cpu))
    assert v.ok is ok and error in v.predicted_error


@pytest.mark.parametrize(
    ("fmt", "os", "ok", "error"),
    [
        (BinaryFormat.ELF, "linux", True, ""),
        (BinaryFormat.PE, "linux", False, "invalid ELF header"),
        (BinaryFormat.ELF, "win32", False, "not a valid Win32 application"),
        (BinaryFormat.MACHO, "darwin", True, ""),
    ],
)
def test_os(fmt: BinaryFormat, os: str, ok: bool, error: str) -> None:
    v = verdict_for(Demand.OS, wheel(so(format=fmt)), machine(os=os))
    assert v.ok is ok and error in v.predicted_error


def test_glibc_floor_names_the_missing_version() -> None:
    v = verdict_for(Demand.GLIBC, wheel(so(glibc=(2, 35))), machine(glibc="2.31"))
    assert v.ok is False
    assert "GLIBC_2.35" in v.wheel_needs and v.predicted_error == "version 'GLIBC_2.35' not found"
    assert verdict_for(Demand.GLIBC, wheel(so(glibc=(2, 35))), machine(glibc="2.35")).ok is True


def test_glibcxx_floor() -> None:
    facts = wheel(so(glibc=(2, 17), glibcxx=(3, 4, 32)))
    v = verdict_for(Demand.GLIBC, facts, machine(glibcxx=(3, 4, 30)))
    assert v.ok is False and "GLIBCXX_3.4.32" in v.predicted_error
    assert verdict_for(Demand.GLIBC, facts, machine(glibcxx=(3, 4, 33))).ok is True
    unchecked = verdict_for(Demand.GLIBC, facts, machine(glibcxx=None))
    assert unchecked.ok is True and "not checked" in unchecked.reason


def test_glibc_unknown_only_matters_when_needed() -> None:
    m = replace(machine(), glibc=Probed.unknown("no glibc here; pass --glibc"))
    assert verdict_for(Demand.GLIBC, wheel(so(glibc=(2, 28))), m).ok is None
    assert verdict_for(Demand.GLIBC, wheel(so()), m).ok is True


def test_judge_a_wheel_that_runs() -> None:
    facts = wheel(
        so(sass="sm_80 sm_89", ptx="compute_89", glibc=(2, 28), needed=("libc10.so", "libcudart.so.12"))
    )
    verdicts = judge(facts, WheelName.parse(NAME), machine())
    assert all(v.ok for v in verdicts), [str(v) for v in verdicts if not v.ok]


def test_arch_kind_is_respected_by_rank_helpers() -> None:
    assert GpuArch.parse("compute_80").kind is ArchKind.PTX
