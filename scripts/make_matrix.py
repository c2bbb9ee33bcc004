"""Write librarian/data/matrix.toml: PyTorch's release matrix for torch 2.4 to 2.15, with sources.

Run ``python scripts/make_matrix.py`` after editing the tables below; ``--check`` exits 1 when the
packaged file differs from what this script writes (tests run it that way).

Sources (each row names the one it was read from):
  [T] pytorch/test-infra tools/scripts/generate_binary_build_matrix.py, at the commit where
      CURRENT_STABLE_VERSION became X.0: CUDA_ARCHES_DICT / PYTHON_ARCHES_DICT "release".
  [R] pytorch/pytorch RELEASE.md "Release Compatibility Matrix" (a verbatim third-party copy, ~Aug 2026).
  [S] Comfy-Forge/cuda-wheels defaults/scraped_torch_matrix.json @a3807ef (2026-08-20): what
      download.pytorch.org/whl/cuXYZ/torch/ lists, floored at CUDA 12.4 and Python 3.10.
  [B] pytorch/pytorch .ci/manywheel/build_cuda.sh, one stored version (00c7a380, date unknown;
      it knows CUDA 12.6/12.8/12.9 only, so it is from the 2.8-2.11 era: inference).
  [W] pytorch/pytorch .ci/pytorch/windows/cudaXYZ.bat, one stored version each (dates unknown): the
      TORCH_CUDA_ARCH_LIST of torch's Windows builds per CUDA line.
  [P] PyPI's JSON API for torch 2.15.0 (read 2026-12-01): its wheels' tags (Pythons, platforms) and
      Requires-Dist (cuda-toolkit 13.2.2 on Linux: the default wheels are CUDA 13.2 builds).
Combos with no arch list from any source get one derived from librarian/data/gpus.toml when read
(librarian.pytorch.matrix): every GPU of the platform that the CUDA line can target.
Whatever a source does not say is listed in the row's ``uncertain`` field.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from librarian.coords import parse_cuda, parse_torch
from librarian.pytorch.matrix_file import dump_matrix
from librarian.pytorch.releases import (
    ArchRow,
    CPython,
    CudaRow,
    CxxAbi,
    MatrixDoc,
    Platform,
    Status,
    TorchRow,
)

OUT = Path(__file__).resolve().parent.parent / "librarian" / "data" / "matrix.toml"

LX, LA, WIN = Platform.LINUX_X86_64, Platform.LINUX_AARCH64, Platform.WINDOWS_AMD64
ST, EX, SV = Status.STABLE, Status.EXPERIMENTAL, Status.SERVED
R_DATE = dt.date(2026, 8, 1)  # [R] is dated only to "about Aug 2026"
S_SRC = (
    "[S] Comfy-Forge/cuda-wheels defaults/scraped_torch_matrix.json @a3807ef (download.pytorch.org listing)"
)
S_DATE = dt.date(2026, 8, 20)
R_ARCH = "[R] pytorch/pytorch RELEASE.md, arch lists 'For Release 2.12, 2.13 and 2.14'"
B_SRC = "[B] pytorch/pytorch .ci/manywheel/build_cuda.sh @00c7a380 (one stored version, date unknown)"
# [W]: CUDA line -> (commit of the stored cudaXYZ.bat, its TORCH_CUDA_ARCH_LIST)
W_ARCH = {
    "11.8": ("74fabf1dc", "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"),
    "12.1": ("74fabf1dc", "5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"),
    "12.4": ("475876a47", "5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"),
    "12.6": ("18f79c00d", "5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"),
    "12.8": ("07619f946", "7.5;8.0;8.6;9.0;10.0;12.0"),
    "12.9": ("1a1a3262a", "7.5;8.0;8.6;9.0;10.0;12.0"),
    "13.0": ("525a5e5db", "7.5;8.0;8.6;9.0;10.0;12.0"),
}
P_SRC = "[P] PyPI JSON API, torch 2.15.0 (wheel tags; Requires-Dist cuda-toolkit==13.2.2 on Linux)"


def py(first: int, last: int, *free_threaded: int) -> tuple[CPython, ...]:
    """cp3{first}..cp3{last} plus the free-threaded builds cp3{n}t."""
    return tuple(CPython(3, m) for m in range(first, last + 1)) + tuple(
        CPython(3, m, True) for m in free_threaded
    )


# torch minor -> ([T] commit, [T] date, Pythons of the [T] release list, Pythons [R]/[S] add as experimental)
RELEASES: dict[str, tuple[str, dt.date, tuple[CPython, ...], tuple[CPython, ...]]] = {
    "2.4": ("ac9a718ca", dt.date(2024, 7, 23), py(8, 12), ()),
    "2.5": (
        "5510fd052",
        dt.date(2024, 10, 16),
        py(9, 12),
        py(13, 13),
    ),  # [R] 3.13 exp.; [S] serves cu124 cp313
    "2.6": ("b1bdc3323", dt.date(2025, 1, 28), py(9, 13), (CPython(3, 13, True),)),  # [R] 3.13t exp.
    "2.7": ("bad60f65d", dt.date(2025, 4, 22), py(9, 13, 13), ()),
    "2.8": ("21480431a", dt.date(2025, 8, 6), py(9, 13, 13), ()),
    "2.9": ("f563b660a", dt.date(2025, 10, 14), py(10, 14, 14), ()),
    "2.10": ("e8208cf27", dt.date(2026, 1, 20), py(10, 14, 13, 14), ()),
    "2.11": ("0cd5e78a1", dt.date(2026, 3, 23), py(10, 14, 13, 14), ()),
    "2.12": ("626d4e708", dt.date(2026, 5, 12), py(10, 14, 14), ()),
    "2.13": ("6d36e31f4", dt.date(2026, 7, 8), py(10, 14, 14), py(15, 15)),  # [S] serves cp315 (Linux)
}

# torch minor -> [(CUDA line, status)] per [R] (identical to the [T] release lists 2.4-2.13).
LINES: dict[str, list[tuple[str, Status]]] = {
    "2.4": [("11.8", ST), ("12.1", ST), ("12.4", EX)],
    "2.5": [("11.8", ST), ("12.1", ST), ("12.4", ST)],
    "2.6": [("11.8", ST), ("12.4", ST), ("12.6", EX)],
    "2.7": [("11.8", ST), ("12.6", ST), ("12.8", EX)],
    "2.8": [("12.6", ST), ("12.8", ST), ("12.9", EX)],
    "2.9": [("12.6", ST), ("12.8", ST), ("13.0", EX)],
    "2.10": [("12.6", ST), ("12.8", ST), ("13.0", EX)],
    "2.11": [("12.6", ST), ("12.8", ST), ("13.0", ST)],
    "2.12": [("12.6", ST), ("13.0", ST), ("13.2", EX)],
    "2.13": [("12.6", ST), ("13.0", ST), ("13.2", EX)],
}
SERVED_CU129 = ("2.9", "2.10", "2.11", "2.12", "2.13")  # [S]: cu129 beyond the release matrix


def abi(torch: str, cuda: str) -> CxxAbi:
    """pre-cxx11 up to 2.5; 2.6 mixed (only cu126 is cxx11); cxx11 from 2.7 (pytorch/pytorch#143962)."""
    t, c = parse_torch(torch), parse_cuda(cuda)
    return CxxAbi.CXX11 if t >= (2, 7) or (t == (2, 6) and c == (12, 6)) else CxxAbi.PRE_CXX11


def platforms(torch: str, cuda: str, status: Status) -> tuple[tuple[Platform, ...], tuple[str, ...]]:
    """The platforms of a row, and whether that list is inferred rather than read."""
    t, c = parse_torch(torch), parse_cuda(cuda)
    if status is SV:  # [S]: cu129 on Linux x86_64 + aarch64 for 2.9-2.13, on Windows only for 2.9
        return ((LX, LA, WIN) if t == (2, 9) else (LX, LA)), ()
    if t >= (2, 12) and c >= (13, 0):  # [R] names Linux x86_64, aarch64 and Windows builds of CUDA 13
        return (LX, LA, WIN), ()
    if t >= (2, 12):  # [R] gives the 12.6 arch list for "x86/Win" only; aarch64 12.6 not named
        return (LX, WIN), ("platforms",)
    # [S] notes only cu124 2.6 as lacking aarch64 (NVIDIA's SBSA toolkits start at 12.5), so every
    # line from 12.6 on is taken to have aarch64 wheels: inference, hence "uncertain".
    return ((LX, LA, WIN) if c >= (12, 6) else (LX, WIN)), ("platforms",)


def torch_rows() -> tuple[TorchRow, ...]:
    rows = []
    for torch, (commit, date, pythons, experimental) in RELEASES.items():
        src = f"[T] pytorch/test-infra generate_binary_build_matrix.py @{commit}; [R] RELEASE.md"
        lines: list[tuple[str, Status]] = LINES[torch] + ([("12.9", SV)] if torch in SERVED_CU129 else [])
        cuda = []
        for line, status in lines:
            plats, unsure = platforms(torch, line, status)
            unsure_abi = (
                ("abi",) if LA in plats and parse_torch(torch) < (2, 7) else ()
            )  # aarch64 ABI unchecked
            cuda.append(
                CudaRow(
                    parse_cuda(line),
                    status,
                    abi(torch, line),
                    pythons,
                    plats,
                    S_SRC if status is SV else src,
                    S_DATE if status is SV else date,
                    python_experimental=experimental,
                    uncertain=unsure + unsure_abi,
                    note="served by download.pytorch.org; not in the release matrix" if status is SV else "",
                )
            )
        rows.append(TorchRow(parse_torch(torch), tuple(cuda)))
    # 2.14: [T] has it only as a candidate (00fa5780c, 2026-08-11); [R] lists it, released 2 Sept 2026.
    # 13.4 is in the [T] test channel (Linux only, hidden) and is left out until it is served.
    py214 = py(10, 15, 14)  # [R] ">=3.10, <=3.15"; cp314t carried over from 2.13 (inference)
    rows.append(
        TorchRow(
            (2, 14),
            tuple(
                CudaRow(
                    parse_cuda(line),
                    ST,
                    CxxAbi.CXX11,
                    py214,
                    plats,
                    "[R] RELEASE.md; [T] candidate @00fa5780c",
                    dt.date(2026, 8, 11),
                    python_experimental=(CPython(3, 15, True),),
                    uncertain=("python", "date"),
                )
                for line, plats in (("12.6", (LX, WIN)), ("13.0", (LX, LA, WIN)), ("13.2", (LX, LA, WIN)))
            ),
            note="release matrix read before the release; refresh from the index to confirm",
        )
    )
    # 2.15: released on PyPI 2026-10-28. PyPI's wheels are the CUDA 13.2 builds (Linux) and name the Pythons;
    # PyTorch's index (its other CUDA lines, its Windows CUDA wheels) was unreachable when this was written,
    # so the row is partial: publish warns, not refuses, on another CUDA line of it ("matrix refresh").
    rows.append(
        TorchRow(
            (2, 15),
            (
                CudaRow(
                    (13, 2),
                    ST,
                    CxxAbi.CXX11,
                    py(11, 15, 14, 15),
                    (LX, LA, WIN),
                    P_SRC,
                    dt.date(2026, 10, 28),
                    uncertain=("platforms",),
                    note="windows-amd64: PyPI's Windows wheel is a CPU build; the CUDA one is on PyTorch's index (not read)",
                ),
            ),
            note="CUDA lines other than 13.2 not read (PyTorch's index was unreachable); run 'librarian matrix refresh'",
            partial=True,
        )
    )
    return tuple(rows)


# PyTorch's ARM build: its own arch lists, and the manywheel rule that drops 5.0, 6.0, 7.0, 7.5 and 8.6.
A_SRC = (
    "[A] pytorch/pytorch .ci/aarch64_linux/aarch64_ci_build.sh @0fb2b95 (12.6: 8.0;9.0; 13.0: "
    "8.0;9.0;10.0;11.0;12.0+PTX) and .ci/manywheel's filter_aarch64_archs"
)


def arch_rows() -> tuple[ArchRow, ...]:
    newest = ((2, 12), (2, 13), (2, 14))
    cu13 = "7.5;8.0;8.6;9.0;10.0;12.0"
    rows = [
        ArchRow((12, 6), p, "5.0;6.0;7.0;7.5;8.0;8.6;9.0", R_ARCH, newest, R_DATE, ("date",))
        for p in (LX, WIN)
    ]
    for line in ((13, 0), (13, 2)):
        rows += [
            ArchRow(line, LX, cu13 + "+PTX", R_ARCH, newest, R_DATE, ("date",)),
            ArchRow(line, WIN, cu13, R_ARCH, newest, R_DATE, ("date",), note="[R]: +PTX on Linux only"),
            ArchRow(
                line,
                LA,
                "8.0;9.0;10.0;11.0;12.0+PTX",
                A_SRC,
                newest,
                R_DATE,
                ("date",),
                note="[R]: aarch64 CUDA 13 builds add 11.0; [A]: and carry no 5.0, 6.0, 7.0, 7.5 or 8.6",
            ),
        ]
    # [A] gives aarch64's 12.6 list; which releases used it is not known.
    rows.append(ArchRow((12, 6), LA, "8.0;9.0", A_SRC, (), None, ("torch", "date")))
    unsure = ("torch", "date", "arch_list")
    rows += [
        ArchRow(
            (12, 8),
            LX,
            "7.0;7.5;8.0;8.6;9.0;10.0;12.0",
            B_SRC,
            (),
            None,
            unsure,
            note="which releases used this list is not known; 2.7's cu128 list may differ",
        ),
        ArchRow((12, 9), LX, "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX", B_SRC, (), None, unsure),
    ]
    rows += [
        ArchRow(
            parse_cuda(line),
            WIN,
            arch_list,
            f"[W] pytorch/pytorch .ci/pytorch/windows/cuda{line.replace('.', '')}.bat @{commit} (one stored version)",
            (),
            None,
            ("torch", "date"),
        )
        for line, (commit, arch_list) in W_ARCH.items()
    ]
    return tuple(rows)


def document() -> MatrixDoc:
    return MatrixDoc(
        torch_rows(),
        arch_rows(),
        (),
        note=(
            "Written by scripts/make_matrix.py from the sources named in each row; fields listed in a row's "
            "'uncertain' are inference, not read from a source. 11.8/12.1/12.4 arch lists: no source read."
        ),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the packaged file is stale")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = dump_matrix(document())
    if args.check:
        return 0 if args.out.read_text(encoding="utf-8") == text else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
