"""The invariant of the one judgement, end to end through the command line, against independent expectations.

A wheel is filed under smX if and only if ``doctor --sm X`` says it runs natively and ``pull --sm X`` finds
it exactly; and where a demand rules a wheel out, doctor and pull name the same demands. The expected GPUs
come from the nvcc command lines that built the checked-in fixtures (``tests/data/cuda/MANIFEST.json``,
each checked against cuobjdump by ``-m oracle``) and NVIDIA's rules written out here, not from librarian's
readers or its judgement.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from librarian.gpus import known_gpus
from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import MANIFEST, elf_bytes, real_sos

COMMANDS = json.loads(MANIFEST.read_text())["files"]
# The GPUs that exist beside an x86_64 CPU: the data of which products there are, not a judgement.
# the GPUs an x86_64 machine with a CUDA 13 driver can have (Kepler drivers stop at CUDA 11.4)
GPUS = [g for g in known_gpus() if "x86_64" in g.cpus and g.runs_cuda((13, 0))]
LINE = ("--torch", "2.9", "--cuda", "13.0")  # the fixtures are built by nvcc 13.0: cu130torch2.9
HERE = (*LINE, "--python", "3.11", "--platform", "manylinux_2_39_x86_64", "--driver", "13.0")
FIXTURES = [
    "multi",
    "special",
    "torch_list",
    "sm_80",
    "sm_86",
    "sm_90",
    "sm_90a",
    "sm75",
    "two_tu",
    "debug",
    "ptx",
]


def sass_of(command: str) -> list[tuple[int, int, str]]:
    """The SASS targets an nvcc command line asks for: ``code=[sm_89,compute_89]`` -> (8, 9, "")."""
    found = []
    for group in re.findall(r"code=\[?([^\]\s']+)", command):
        for code in group.split(","):
            if m := re.fullmatch(r"sm_(\d+)([af]?)", code):
                found.append((int(m[1]) // 10, int(m[1]) % 10, m[2]))
    return found


def runs_natively(sass: list[tuple[int, int, str]], capability: tuple[int, int]) -> bool:
    """NVIDIA's rules for machine code: sm_XY on X.Z (Z >= Y); sm_XYa on X.Y only; sm_XYf like sm_XY."""
    major, minor = capability
    return any((m, n) == capability if s == "a" else (m == major and n <= minor) for m, n, s in sass)


@pytest.fixture(scope="module")
def sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return real_sos(tmp_path_factory)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_filed_iff_doctor_says_natively_iff_pull_finds_it_exactly(
    run: Run, tmp_path: Path, sos: dict[str, Path], fixture: str
) -> None:
    sass = sass_of(COMMANDS[f"{fixture}.so"]["command"])
    expected = {f"sm{g.arch.sm}" for g in GPUS if runs_natively(sass, g.capability)}
    members = {"kern/__init__.py": b"", "kern/_C.so": sos[fixture].read_bytes()}
    whl = make_wheel(tmp_path / "dist", "kern", "1.0", "cp311-cp311-linux_x86_64", members)
    published = run("publish", str(whl), *LINE)
    if not expected:  # PTX alone: no cell, and publish says so
        assert published.code == 2 and "PTX alone files no cell" in published.err
    else:
        assert published.code == 0, published.err
    shard = tmp_path / "wheelhouse/index/kern.json"
    filed = (
        {e["path"].split("/")[1] for e in json.loads(shard.read_text())["wheels"]}
        if shard.exists()
        else set()
    )
    assert filed == expected
    for gpu in GPUS:
        sm = gpu.arch.sm
        report = json.loads(run("doctor", str(whl), "--sm", sm, *HERE, "--json").out)["wheels"][0]
        pulled = run("pull", "kern", "--sm", sm, *HERE, "-o", "out")
        assert report["native"] is (f"sm{sm}" in expected), (sm, report["serving"])
        assert (pulled.code == 0) is (f"sm{sm}" in expected), (sm, pulled)


# A helper library needing GLIBC_2.35 and one mangled c10 symbol: bound to its torch line by its bytes.
HELPER = elf_bytes(
    needed=("libc10.so",),
    verneed={"libc.so.6": ("GLIBC_2.35",)},
    symbols={"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs": False},
)


@pytest.mark.parametrize(
    ("flags", "demand"),
    [
        (("--sm", "90"), "gpu"),  # sm_80 SASS, no PTX: never on a 9.0 GPU
        (("--torch", "2.8"), "torch"),
        (("--cuda", "12.8"), "cuda"),  # a CUDA 13 build on a CUDA 12 torch
        (("--python", "3.12"), "python"),
        (("--platform", "manylinux_2_39_aarch64"), "cpu"),
        (("--platform", "win_amd64"), "os"),
        (("--platform", "linux_x86_64", "--glibc", "2.31"), "glibc"),  # a tag that promises no glibc
    ],
)
def test_each_refusal_is_the_same_demand_in_doctor_and_pull(
    run: Run, tmp_path: Path, sos: dict[str, Path], flags: tuple[str, ...], demand: str
) -> None:
    members = {"kern/_C.so": sos["two_tu"].read_bytes(), "kern/_helper.so": HELPER}
    built = make_wheel(tmp_path / "dist", "kern", "1.0", "cp311-cp311-linux_x86_64", members)
    assert run("publish", str(built), *LINE).code == 0
    whl = tmp_path / "wheelhouse/kern/sm89/torch2.9-cu130/kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    base = {
        "--sm": "89",
        "--torch": "2.9",
        "--cuda": "13.0",
        "--python": "3.11",
        "--platform": "manylinux_2_39_x86_64",
        "--driver": "13.0",
    }
    fits = [x for k, v in base.items() for x in (k, v)]
    assert run("doctor", str(whl), *fits).code == 0 and run("pull", "kern", *fits, "-o", "out").code == 0
    asked = dict(base, **dict(zip(flags[::2], flags[1::2], strict=True)))
    machine = [x for k, v in asked.items() for x in (k, v)]
    doctor = run("doctor", str(whl), *machine, "--json")
    failing = {v["demand"] for v in json.loads(doctor.out)["wheels"][0]["verdicts"] if v["ok"] is False}
    assert doctor.code == 1 and demand in failing, doctor.out
    pulled = run("pull", "kern", *machine, "--json")
    assert pulled.code == 1, pulled
    # the same bytes, filed under sm80, sm86 and sm89: one candidate naming the three cells, not three
    (candidate,) = json.loads(pulled.out)["candidates"]
    assert candidate["cells"] == ["sm80", "sm86", "sm89"] and set(candidate["fails"]) == failing, candidate
    assert pulled.err.count(".whl (sm80, sm86, sm89): ") == 1, pulled.err


def test_a_vouched_cell_has_one_answer_everywhere(run: Run, tmp_path: Path) -> None:
    """A wheel filed under sm120 with --trust-sm (its bytes: sm_80 to sm_90 SASS and compute_90): ls shows
    it, the pip page of the cell lists it, pull serves it (saying why) and plan counts the cell held. pull
    said "no wheel ... for sm120" and plan counted it missing, while ls, the pages and verify had it."""
    sample = min((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*cp311*.whl"))
    published = run("publish", str(sample), *LINE, "--sm", "120", "--trust-sm")
    assert published.code == 0, published.err
    assert "with --trust-sm: pull serves it to those GPUs on your word" in published.err
    assert "0.1.0 (311)" in run("ls").out
    page = tmp_path / "wheelhouse" / "pages" / "sm120-torch2.9-cu130.html"
    assert "tinykern-0.1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl" in page.read_text()
    machine = ("--sm", "120", *LINE, "--python", "3.11", "--platform", "linux_x86_64")
    pulled = run("pull", "tinykern", *machine, "-o", "out")
    assert pulled.code == 0, pulled.err
    assert "the publisher vouched for this GPU" in pulled.err
    plan = run("plan", "tinykern==0.1.0", "--sm", "120", *LINE, "--python", "3.11", "--json")
    assert json.loads(plan.out)["jobs"] == [], plan.out
    assert run("verify", "--deep").code == 0
    other = run("pull", "tinykern", "--sm", "100", *LINE, "--python", "3.11", "--platform", "linux_x86_64")
    assert other.code == 1  # the vouch is for sm120 alone


def test_pulls_near_miss_words_follow_the_verdicts_cause_not_their_words() -> None:
    """pull told misses apart by startswith on the verdicts' reasons: a reworded reason changed its output.
    Now it switches on ``Verdict.cause``; the reason's words may change freely."""
    from librarian.coords import Cell, GpuArch, Label, WheelName
    from librarian.demands import Cause, Demand, Verdict
    from librarian.index import IndexEntry
    from librarian.machine import Machine
    from librarian.ops.resolve import Wants, _blocker
    from tests.demand_builders import machine

    name = WheelName.parse("kern-1.0+cu128torch2.9-cp310-cp310-linux_x86_64.whl")
    cell = Cell("kern", GpuArch.parse("89"), Label.parse("cu128torch2.9"))
    entry = IndexEntry("kern/sm89/torch2.9-cu128/" + str(name), "0" * 64, 1, cell, "")
    m: Machine = machine(python="3.11")
    wants = Wants.of(m)
    reworded = Verdict(
        Demand.PYTHON, False, "cp310-cp310", "cp311-cp311", "reworded", cause=Cause.OTHER_PYTHON
    )
    assert _blocker(reworded, entry, wants).startswith("another Python: cp310, this interpreter is cp311")
    driver = Verdict(Demand.CUDA, False, "CUDA 12.8", "driver 11.8", "reworded", cause=Cause.DRIVER_TOO_OLD)
    assert _blocker(driver, entry, wants) == "CUDA: reworded"  # the driver: no other CUDA line would help
