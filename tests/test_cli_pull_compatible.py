"""``librarian pull`` when the store has no wheel for this GPU: the explained miss, ``--compatible``, and
the verdicts that rule a candidate out, end to end on wheels around real nvcc-built ``.so`` files.

publish files a wheel under every GPU its SASS serves (sm_86 -> sm86 and sm89), so these stores are made
with ``--sm`` to leave the GPU's own cell empty, as a store filed by hand or by an older librarian is. The
judgement, not the cell, decides: a wheel whose SASS runs natively here is taken exactly, saying where it
was filed; one that runs only by PTX JIT (or on an older CUDA minor) needs ``--compatible``."""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.ops.machine import installer
from tests.builders import HERE_PYTHON, HERE_TAG
from tests.conftest import Result, Run
from tests.gpu_wheels import gpu_sos, isolate_machine, so_wheel

LINE = ("--cuda", "13.0", "--torch", "2.9")
WANT = (*LINE, "--python", "3.11", "--platform", "linux_x86_64")
CELLS = "kern/sm{}/torch2.9-cu130/kern-{}+cu130torch2.9-cp311-cp311-linux_x86_64.whl"


@pytest.fixture(scope="session")
def sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gpu_sos(tmp_path_factory)


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[Path]]:
    """No GPU or torch here, and pip never runs: the files ``--install`` would hand it are recorded."""
    isolate_machine(monkeypatch, tmp_path / "bin")
    installed: list[list[Path]] = []
    monkeypatch.setattr(installer, "install", lambda files, interpreter: installed.append(list(files)))
    return installed


def publish(run: Run, so: Path, version: str = "1.0", *flags: str) -> None:
    wheel = so_wheel(Path("dist") / version / so.stem, so, version=version)
    result = run("publish", str(wheel), *LINE, *flags)
    assert result.code == 0, result


def pulled(result: Result) -> list[str]:
    """The store paths a pull fetched, from its ``path -> file`` lines."""
    return [line.split(" -> ")[0] for line in result.out.splitlines() if " -> " in line]


def test_native_sass_filed_elsewhere_is_taken_exactly_and_says_where(run: Run, sos: dict[str, Path]) -> None:
    publish(run, sos["sm_86"], "1.0", "--sm", "86")
    took = run("pull", "kern", "--sm", "89", *WANT, "-o", "out")
    assert took.code == 0, took
    assert pulled(took) == [CELLS.format(86, "1.0")]
    near = CELLS.format(86, "1.0").split("/")[-1]
    assert (
        took.err
        == f"librarian: note: kern: took {near}, filed under sm86; it runs here by compatible sm_86 SASS\n"
    )


def test_a_miss_names_the_gpu_and_compatible_takes_it(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    publish(run, sos["ptx"], "1.0", "--sm", "86", "--trust-sm")  # compute_80 PTX only
    miss = run("pull", "kern", "--sm", "89", *WANT, "-o", "out")
    assert miss.code == 1, miss
    assert miss.err.startswith(
        "librarian: error: kern: no wheel in wheelhouse for sm89, torch 2.9, cu130, cp311"
    )
    near = CELLS.format(86, "1.0").split("/")[-1]
    assert f"  {near} (sm86): runs on sm_89 only by JIT-compiling its compute_80 PTX\n" in miss.err
    how = "compute_80 PTX (JIT-compiled at first use) (driver not checked; pass --driver)"
    assert f"hint: kern: {near} (sm86) runs here by {how}; pass --compatible to take it" in miss.err
    assert not (tmp_path / "out").exists()
    took = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible")
    assert took.code == 0, took
    assert pulled(took) == [CELLS.format(86, "1.0")]
    assert (
        took.err
        == f"librarian: note: kern: no exact match; took {near} (filed under sm86), which runs here by {how}\n"
    )
    assert (tmp_path / "out" / near).is_file()


def test_compatible_prefers_sass_over_ptx(run: Run, sos: dict[str, Path]) -> None:
    publish(run, sos["ptx"], "1.1", "--sm", "86", "--trust-sm")  # PTX only: newer, and filed nearer the GPU
    ptx_only = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible", "--driver", "13.0")
    assert ptx_only.code == 0 and pulled(ptx_only) == [CELLS.format(86, "1.1")]
    assert "runs here by compute_80 PTX (JIT-compiled at first use)\n" in ptx_only.err
    unchecked = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible")
    assert "(driver not checked; pass --driver)" in unchecked.err
    too_old = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible", "--driver", "12.4")
    # a CUDA 13 torch beside a CUDA 12.4 driver is no machine (issue 45 item 7): refused, naming the fix
    assert too_old.code == 2 and "needs a CUDA 13 driver, and --driver 12.4 is older" in too_old.err
    publish(run, sos["sm_80"], "1.0", "--sm", "80")
    sass = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible", "--driver", "13.0")
    assert sass.code == 0 and pulled(sass) == [
        CELLS.format(80, "1.0")
    ]  # native SASS: exact, before newer PTX
    assert "it runs here by compatible sm_80 SASS" in sass.err


def test_compatible_takes_the_newest_at_the_same_match(run: Run, sos: dict[str, Path]) -> None:
    publish(run, sos["sm_86"], "1.0", "--sm", "86")
    publish(run, sos["sm_80"], "1.0.1", "--sm", "80")
    publish(run, sos["sm_80"], "1.0rc1", "--sm", "80")
    result = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible")
    assert result.code == 0 and pulled(result) == [CELLS.format(80, "1.0.1")]
    publish(run, sos["sm_86"], "1.0.1", "--sm", "86")  # same version: the arch nearest the GPU
    again = run("pull", "kern", "--sm", "89", *WANT, "-o", "out", "--compatible")
    assert pulled(again) == [CELLS.format(86, "1.0.1")]


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        # it links no torch, so no torch line blocks it: its CUDA 13 runtime does, on a CUDA 12.8 torch
        (("--torch", "2.8", "--cuda", "12.8", "--python", "3.11"), "another CUDA line: cu130, not cu128"),
        ((*LINE, "--python", "3.12"), "another Python: cp311, this interpreter is cp312"),
    ],
)
def test_compatible_never_crosses_torch_or_python(
    run: Run, sos: dict[str, Path], flags: tuple[str, ...], why: str
) -> None:
    publish(run, sos["sm_86"], "1.0", "--sm", "86")
    result = run("pull", "kern", "--sm", "89", *flags, "--platform", "linux_x86_64", "--compatible")
    assert result.code == 1, result
    assert why in result.err and "hint" not in result.err


def test_a_wheel_filed_where_its_code_does_not_run_is_never_installed_unforced(
    run: Run, sos: dict[str, Path], bare: list[list[Path]]
) -> None:
    # filed under sm89, binaries sm_90 only; for this interpreter's Python, as --install installs into it
    wheel = so_wheel(Path("dist") / "here", sos["sm_90"], tags=HERE_TAG)
    assert run("publish", str(wheel), *LINE, "--sm", "89", "--trust-sm").code == 0
    here = (*LINE, "--python", HERE_PYTHON, "--platform", "linux_x86_64")
    # pull takes the vouched cell, saying so; installing code its bytes say will not run needs --force
    refused = run("pull", "kern", "--sm", "89", *here, "-o", "out", "--install")
    assert refused.code == 2, refused
    assert "Traceback" not in refused.err and bare == []
    assert "the publisher vouched for this GPU" in refused.err
    assert "will not run here (GPU arch: wheel needs sm_90, machine has sm_89); pass --force" in refused.err
    # No sm90 cell, but the judgement reads the binaries: they are sm_90, so it runs there natively.
    fits = run("pull", "kern", "--sm", "90", *here, "-o", "out2", "--install")
    assert fits.code == 0, fits
    assert "filed under sm89; it runs here by its own sm_90 SASS" in fits.err
    assert bare == [[Path("out2") / f"kern-1.0+cu130torch2.9-{HERE_TAG}.whl"]]


def test_no_gpu_and_no_sm_is_one_line(run: Run, sos: dict[str, Path]) -> None:
    publish(run, sos["sm_86"])
    result = run("pull", "kern", *WANT)
    assert result.code == 2 and result.err == "librarian: error: --sm: no GPU found; pass --sm\n"
