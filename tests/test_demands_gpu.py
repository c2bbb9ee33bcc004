"""The GPU demand (librarian.demands.gpu): NVIDIA's rules, members that load, partial service, cells."""

from __future__ import annotations

import pytest

from librarian.coords import WheelName
from librarian.demands import Demand, Wheel
from librarian.demands import cells as judged_cells
from librarian.demands.gpu import NO_KERNEL_IMAGE, PTX_TOO_NEW, GpuMatch, gpu_match, runs_on
from librarian.errors import BadInput
from librarian.facts import BinaryFacts
from librarian.gpus import known_gpus, parse_gpus, parse_real_sm
from tests.conftest import Run
from tests.demand_builders import NAME, arch, machine, so, verdict_for, wheel

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


def test_a_member_without_code_for_the_gpu_makes_it_run_partly() -> None:
    facts = wheel(so("kern/a.so", sass="sm_89"), so("kern/b.so", sass="sm_90"), so("kern/host.so"))
    v = verdict_for(Demand.GPU, facts, machine(sm="89"))
    assert v.ok is True and v.partly == ("kern/b.so",) and v.predicted_error == ""
    assert v.reason.startswith("runs, partly: kern/b.so has no code for sm_89")
    on_90 = verdict_for(Demand.GPU, facts, machine(sm="90"))
    assert on_90.ok is True and on_90.partly == ("kern/a.so",)


def test_no_member_with_code_for_the_gpu_does_not_run() -> None:
    facts = wheel(so("kern/a.so", sass="sm_89"), so("kern/b.so", sass="sm_90"))
    v = verdict_for(Demand.GPU, facts, machine(sm="120"))
    assert v.ok is False and v.predicted_error == NO_KERNEL_IMAGE
    assert v.reason == "none of kern/a.so, kern/b.so has code for sm_120"


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


def test_gpu_match_prefers_exact_then_sass_then_ptx() -> None:
    assert gpu_match([arch("sm_80"), arch("sm_89")], (8, 9)) == (GpuMatch.EXACT, arch("sm_89"))
    assert gpu_match([arch("sm_80"), arch("sm_86")], (8, 9)) == (GpuMatch.SASS, arch("sm_86"))
    assert gpu_match([arch("compute_80")], (8, 9)) == (GpuMatch.PTX, arch("compute_80"))
    assert gpu_match([arch("sm_90")], (8, 9)) is None


# --- which members load: CUDA-line alternatives ---------------------------------------------------------------

BNB = (  # bitsandbytes' pattern: one build per CUDA line, the line of torch picks one
    so("bitsandbytes/libbitsandbytes_cuda118.so", sass="sm_50 sm_60 sm_75 sm_80 sm_86 sm_89 sm_90"),
    so("bitsandbytes/libbitsandbytes_cuda128.so", sass="sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120"),
    so("bitsandbytes/libbitsandbytes_cuda130.so", sass="sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120"),
    so("bitsandbytes/libbitsandbytes_cpu.so"),
)
PLAIN = "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"


def test_the_cuda_line_picks_one_alternative() -> None:
    facts = wheel(*BNB, name=PLAIN)
    v = verdict_for(Demand.GPU, facts, machine(sm="120", cuda="12.8", torch=None), PLAIN)
    assert v.ok is True and v.partly == () and "runs sm_120 SASS" in v.reason
    assert set(v.not_loaded) == {
        "bitsandbytes/libbitsandbytes_cuda118.so",
        "bitsandbytes/libbitsandbytes_cuda130.so",
    }
    old = verdict_for(Demand.GPU, facts, machine(sm="120", cuda="11.8", torch=None), PLAIN)
    assert old.ok is False and old.predicted_error == NO_KERNEL_IMAGE
    assert old.reason == "bitsandbytes/libbitsandbytes_cuda118.so has no code for sm_120"


def test_an_older_minor_of_the_same_major_loads_and_a_missing_line_is_named() -> None:
    facts = wheel(*BNB, name=PLAIN)
    newer = verdict_for(Demand.GPU, facts, machine(sm="89", cuda="12.9", torch=None), PLAIN)
    assert newer.ok is True and "bitsandbytes/libbitsandbytes_cuda128.so" not in newer.not_loaded
    older = verdict_for(Demand.GPU, facts, machine(sm="89", cuda="12.4", torch=None), PLAIN)
    assert (
        older.ok is False
        and "none of libbitsandbytes_cuda118.so" in older.reason
        and "CUDA 12.4" in older.reason
    )


def test_an_unknown_cuda_line_leaves_the_choice_open() -> None:
    facts = wheel(*BNB, name=PLAIN)
    v = verdict_for(Demand.GPU, facts, machine(sm="120", cuda=None, torch=None), PLAIN)
    assert v.ok is True and "pass --cuda" in v.reason


def test_members_linking_different_libcudart_majors_are_alternatives() -> None:
    facts = wheel(
        so("k/_C12.so", sass="sm_90", needed=("libcudart.so.12",)),
        so("k/_C13.so", sass="sm_100", needed=("libcudart.so.13",)),
    )
    on_13 = verdict_for(Demand.GPU, facts, machine(sm="100", cuda="13.0", torch="2.9"))
    assert on_13.ok is True and on_13.not_loaded == ("k/_C12.so",) and on_13.partly == ()
    on_12 = verdict_for(Demand.GPU, facts, machine(sm="100", cuda="12.8", torch="2.8"))
    assert on_12.ok is False and "k/_C12.so has no code for sm_100" in on_12.reason


TORCHAO = (  # torchao 0.18's pattern: each member loaded only on its GPUs
    so("torchao/_C_cutlass_90a.so", sass="sm_90a"),
    so("torchao/_C_mxfp8.so", sass="sm_100", ptx="compute_120"),
    so("torchao/_C.so"),
)


@pytest.mark.parametrize(
    ("sm", "lacking"), [("90", "torchao/_C_mxfp8.so"), ("100", "torchao/_C_cutlass_90a.so")]
)
def test_gpu_specific_members_run_partly(sm: str, lacking: str) -> None:
    v = verdict_for(Demand.GPU, wheel(*TORCHAO), machine(sm=sm))
    assert v.ok is True and v.partly == (lacking,) and lacking in v.reason


def test_gpu_specific_members_none_for_this_gpu() -> None:
    v = verdict_for(Demand.GPU, wheel(*TORCHAO), machine(sm="89"))
    assert v.ok is False and "none of torchao/_C_cutlass_90a.so, torchao/_C_mxfp8.so" in v.reason


# --- cells: the real GPUs a wheel's SASS serves ---------------------------------------------------------------


def cells(*binaries: BinaryFacts, name: str = NAME, line: tuple[int, int] | None = (12, 8)) -> list[str]:
    return [
        f"sm{c.sm.sm}" for c in judged_cells(Wheel(WheelName.parse(name), wheel(*binaries, name=name)), line)
    ]


@pytest.mark.parametrize(
    ("sass", "ptx", "cpu", "expected"),
    [
        ("sm_80 sm_86 sm_90", "compute_90", "x86_64", ["sm80", "sm86", "sm89", "sm90"]),  # 8.0;8.6;9.0+PTX
        (
            "sm_80 sm_86 sm_90",
            "compute_90",
            "aarch64",
            ["sm80", "sm86", "sm87", "sm89", "sm90"],
        ),  # + Jetson Orin
        ("sm_90a", "", "x86_64", ["sm90"]),
        ("sm_100f", "", "x86_64", ["sm100", "sm103", "sm107"]),  # 10.7 (Rubin): its family
        ("sm_120f", "", "x86_64", ["sm120"]),  # 12.1 (DGX Spark) ships only with an Arm CPU
        ("sm_120f", "", "aarch64", ["sm120", "sm121"]),
        ("sm_75", "", "x86_64", ["sm75"]),
        ("", "compute_80", "x86_64", []),  # PTX alone files no cell
    ],
)
def test_cells_by_nvidia_rules(sass: str, ptx: str, cpu: str, expected: list[str]) -> None:
    assert cells(so(sass=sass, ptx=ptx, cpu=cpu)) == expected


def test_cells_of_gpu_specific_members_name_what_each_lacks() -> None:
    found = {
        f"sm{c.sm.sm}": c.partly for c in judged_cells(Wheel(WheelName.parse(NAME), wheel(*TORCHAO)), (12, 8))
    }
    assert found == {
        "sm90": ("torchao/_C_mxfp8.so",),
        "sm100": ("torchao/_C_cutlass_90a.so",),
        "sm103": ("torchao/_C_cutlass_90a.so",),
        "sm107": ("torchao/_C_cutlass_90a.so",),
    }


def test_cells_follow_the_labelled_cuda_line() -> None:
    line_118 = cells(*BNB, name=PLAIN, line=(11, 8))
    assert "sm120" not in line_118 and "sm89" in line_118 and "sm50" in line_118
    assert "sm120" in cells(*BNB, name=PLAIN, line=(12, 8))


# --- the GPUs that exist ------------------------------------------------------------------------------------


def test_known_gpus_are_real_and_carry_their_cpus() -> None:
    known = {g.arch.sm: g for g in known_gpus()}
    assert {"75", "80", "86", "87", "89", "90", "100", "103", "110", "120", "121"} <= set(known)
    assert "88" not in known and "101" not in known
    assert known["87"].cpus == frozenset({"aarch64"}) and "x86_64" in known["89"].cpus


def test_rubin_is_a_gpu_from_cuda_13_4(run: Run) -> None:
    """Issue 52, item 5: torch 2.14's extension builder accepts 10.7, 10.7a and 'Rubin'; ptxas names sm_107
    from CUDA 13.4 on."""
    rubin = {g.arch.sm: g for g in known_gpus()}["107"]
    assert (
        rubin.compiled_by((13, 4))
        and not rubin.compiled_by((13, 0))
        and rubin.ships_with(frozenset({"x86_64"}))
    )
    doctor = run("doctor", "--sm", "107", "--torch", "2.14", "--cuda", "13.0")
    assert doctor.code == 0 and "--sm 107 sm_107 (selected)" in doctor.out, doctor.err


@pytest.mark.parametrize(
    ("text", "sm"), [("89", "89"), ("sm_89", "89"), ("8.9", "89"), ("120", "120"), ("10.7", "107")]
)
def test_parse_real_sm(text: str, sm: str) -> None:
    assert parse_real_sm(text).sm == sm


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "86a",
            "there is no sm_86a .arch- and family-specific code exists from sm_90a on.; name the GPU: 86",
        ),
        ("89a", "there is no sm_89a"),
        ("90a", "filed under 90"),
        ("88", "no GPU of compute capability 8.8"),
        ("compute_80", "name the GPU"),
        ("x", "not a GPU arch"),
    ],
)
def test_parse_real_sm_refuses_what_no_gpu_is(text: str, says: str) -> None:
    with pytest.raises(BadInput, match=says):
        parse_real_sm(text)


def test_a_broken_gpu_list_names_its_file() -> None:
    with pytest.raises(BadInput, match="mine.toml: not a GPU list"):
        parse_gpus('[[gpu]]\nsm = "nine"\ncpus = []\n', "mine.toml")


def test_cells_are_only_where_a_real_machine_runs_the_wheel() -> None:
    """An aarch64 CUDA 12.9 wheel with code for Jetson Nano, TX2, Xavier and Orin: the first three have
    no driver past CUDA 10.2 or 11.4, so only Orin is a cell; an x86_64 wheel is never filed under a
    Jetson (they come only with Arm CPUs)."""
    from librarian.coords import WheelName
    from librarian.demands import Wheel, cells
    from tests.demand_builders import so, wheel

    name = "kern-1.0+cu129torch2.9-cp312-cp312-manylinux_2_35_aarch64.whl"
    facts = wheel(so(sass="sm_53 sm_62 sm_72 sm_87", cpu="aarch64"), name=name)
    filed = [c.sm.sm for c in cells(Wheel(WheelName.parse(name), facts))]
    assert "87" in filed and not {"53", "62", "72"} & set(filed), filed
    old = (
        "kern-1.0+cu118torch2.1-cp312-cp312-manylinux_2_35_aarch64.whl"  # CUDA 11: Xavier's drivers reach it
    )
    facts = wheel(so(sass="sm_53 sm_62 sm_72 sm_87", cpu="aarch64"), name=old)
    filed = [c.sm.sm for c in cells(Wheel(WheelName.parse(old), facts))]
    assert {"72", "87"} <= set(filed) and not {"53", "62"} & set(filed), filed
    x86 = "kern-1.0+cu129torch2.9-cp312-cp312-linux_x86_64.whl"
    facts = wheel(so(sass="sm_86 sm_87", cpu="x86_64"), name=x86)
    assert "87" not in [c.sm.sm for c in cells(Wheel(WheelName.parse(x86), facts))]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--sm", "87", "--platform", "linux_x86_64"), "Jetson AGX Orin, Orin Nano (sm87) come only with aarch64"),
        (("--sm", "121", "--platform", "manylinux_2_28_x86_64"), "DGX Spark (GB10) (sm121) come only with aarch64"),
        (("--sm", "62", "--platform", "manylinux_2_28_aarch64", "--cuda", "12.8"), "no driver past CUDA 10.2"),
    ],
)  # fmt: skip
def test_a_machine_that_cannot_exist_is_refused_in_one_line(run, tmp_path, argv, says) -> None:  # type: ignore[no-untyped-def]
    from tests.builders import make_wheel

    whl = make_wheel(tmp_path, "kern", "1.0", "cp311-cp311-linux_x86_64")
    for command in (("doctor", str(whl)), ("pull", "kern", "--repo", str(tmp_path))):
        result = run(*command, *argv, "--torch", "2.9", "--python", "3.11")
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert result.err.startswith("librarian: error: no such machine: ") and says in result.err
        assert "describe it with --" in result.err


def test_publish_files_no_cell_a_real_machine_cannot_be_even_with_trust_sm(run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.builders import make_wheel

    x86 = make_wheel(tmp_path / "a", "kern", "1.0", "cp311-cp311-linux_x86_64")
    refused = run("publish", str(x86), "--torch", "2.9", "--cuda", "12.8", "--sm", "87", "--trust-sm")
    assert (
        refused.code == 2 and "--sm 87: Jetson AGX Orin, Orin Nano come only with aarch64 CPUs" in refused.err
    )
    arm = make_wheel(tmp_path / "b", "kern", "1.0", "cp311-cp311-manylinux_2_28_aarch64")
    refused = run("publish", str(arm), "--torch", "2.9", "--cuda", "12.8", "--sm", "72", "--trust-sm")
    assert (
        refused.code == 2
        and "--sm 72: Jetson AGX Xavier, Xavier NX have no driver past CUDA 11.4" in refused.err
    )
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))
    filed = run("publish", str(arm), "--torch", "2.9", "--cuda", "12.8", "--sm", "87", "--trust-sm")
    assert filed.code == 0, filed.err
