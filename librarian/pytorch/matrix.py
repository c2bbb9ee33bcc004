"""The combos PyTorch shipped: (torch minor, CUDA line, Python, platform), with queries and renderings.

The packaged ``librarian/data/matrix.toml`` (written by ``scripts/make_matrix.py``) holds the release
rows; a user override file (written by ``librarian matrix refresh``) adds what PyTorch's index serves.
Everything here is pure except the small :func:`load_matrix` section at the end; the file format is
:mod:`librarian.pytorch.releases`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from librarian.coords import Label, MajorMinor, format_cuda, format_version, parse_cuda, parse_torch
from librarian.errors import BadInput
from librarian.gpus import compiled_by
from librarian.pytorch.matrix_file import SCHEMA, dump_matrix, parse_matrix
from librarian.pytorch.releases import (
    ArchRow,
    CPython,
    CudaRow,
    CxxAbi,
    MatrixDoc,
    Platform,
    ServedRow,
    Status,
    TorchRow,
    merge_matrix,
)
from librarian.safeio import read_regular, user_config_file

TORCH_INDEX = "https://download.pytorch.org/whl"  # PyTorch's wheel index: one folder per CUDA line

__all__ = [
    "SCHEMA",
    "TORCH_INDEX",
    "ArchRow",
    "CPython",
    "Combo",
    "CudaRow",
    "CxxAbi",
    "Matrix",
    "MatrixDoc",
    "Platform",
    "Selection",
    "ServedRow",
    "Status",
    "TorchRow",
    "derived_arch_list",
    "dump_matrix",
    "load_matrix",
    "merge_matrix",
    "override_path",
    "packaged_matrix",
    "parse_matrix",
    "read_override",
]


@dataclass(frozen=True, slots=True)
class Combo:
    """One shipped cell: a torch minor built against a CUDA line, for one CPython and platform."""

    torch: MajorMinor
    cuda: MajorMinor
    python: CPython
    platform: Platform
    status: Status
    abi: CxxAbi | None  # None: served only, and no release row says the ABI
    # The release row's fields that are inference, not read from a source (its ``uncertain``): ``abi``,
    # ``python``, ``platforms``, ``date``; a combo the index served says its Python and platform itself.
    inferred: tuple[str, ...] = ()

    @property
    def label(self) -> Label:
        """The librarian label of wheels built for this combo: ``cu128torch2.8``."""
        return Label(self.cuda, self.torch)

    @property
    def key(self) -> tuple[MajorMinor, MajorMinor, tuple[int, int, bool], str]:
        """Sort and identity key (status and ABI are properties of the key, not part of it)."""
        return self.torch, self.cuda, self.python.key, self.platform.value

    @property
    def torch_install(self) -> str:
        """The pip arguments that install this torch build: ``torch==2.9.* --index-url .../whl/cu128``."""
        return f"torch=={format_version(self.torch)}.* --index-url {TORCH_INDEX}/cu{format_cuda(self.cuda)}"


# --- queries ---------------------------------------------------------------------------------------


def _combos(doc: MatrixDoc) -> tuple[Combo, ...]:
    cells: dict[tuple[object, ...], Combo] = {}
    rows = {(t.version, c.line): c for t in doc.torch for c in t.cuda}
    for (torch, cuda), c in rows.items():
        for py in (*c.python, *c.python_experimental):
            # An experimental Python makes the cell experimental even on a stable CUDA line.
            status = (
                max(c.status, Status.EXPERIMENTAL, key=lambda s: s.rank)
                if py in c.python_experimental
                else c.status
            )
            for plat in c.platforms:
                combo = Combo(torch, cuda, py, plat, status, c.abi, c.uncertain)
                cells[combo.key] = combo
    for s in doc.served:
        row = rows.get((s.torch, s.cuda))
        for py in s.python:
            combo = Combo(
                s.torch,
                s.cuda,
                py,
                s.platform,
                row.status if row else Status.SERVED,
                row.abi if row else None,
                tuple(f for f in row.uncertain if f == "abi") if row else (),
            )
            cells.setdefault(combo.key, combo)  # a release row already says more than the index
    return tuple(sorted(cells.values(), key=lambda c: c.key))


@dataclass(frozen=True, slots=True)
class Selection:
    """Which combos to list or build: each empty set means "any"; ``newest`` keeps the N newest torch minors."""

    torch: frozenset[MajorMinor] = frozenset()
    cuda: frozenset[MajorMinor] = frozenset()
    python: frozenset[CPython] = frozenset()
    platforms: frozenset[Platform] = frozenset()
    newest: int | None = None
    stable_only: bool = False

    @classmethod
    def parse(
        cls,
        torch: Iterable[str] = (),
        cuda: Iterable[str] = (),
        python: Iterable[str] = (),
        platform: Iterable[str] = (),
        newest: int | None = None,
        stable_only: bool = False,
    ) -> Selection:
        """A selection from command-line text (``--torch 2.8 --cuda 12.8 --python 3.12 --platform linux-x86_64``)."""
        if newest is not None and newest < 1:
            raise BadInput(f"{newest}: --newest must be 1 or more")
        try:
            platforms = frozenset(Platform.parse(p) for p in platform)
        except ValueError as e:
            raise BadInput(str(e)) from e
        return cls(
            frozenset(map(parse_torch, torch)),
            frozenset(map(parse_cuda, cuda)),
            frozenset(map(CPython.parse, python)),
            platforms,
            newest,
            stable_only,
        )

    def admits(self, c: Combo) -> bool:
        """Whether ``c`` passes every filter but ``newest``."""
        return (
            (not self.torch or c.torch in self.torch)
            and (not self.cuda or c.cuda in self.cuda)
            and (not self.python or c.python in self.python)
            and (not self.platforms or c.platform in self.platforms)
            and (not self.stable_only or c.status is Status.STABLE)
        )


@dataclass(frozen=True, slots=True)
class Matrix:
    """The effective matrix (packaged data with the user's override laid over it) and its queries."""

    doc: MatrixDoc
    all_combos: tuple[Combo, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all_combos", _combos(self.doc))

    def combos(
        self,
        torch: str | MajorMinor | None = None,
        cuda: str | MajorMinor | None = None,
        python: str | CPython | None = None,
    ) -> tuple[Combo, ...]:
        """Every shipped combo, optionally only those of one torch minor, CUDA line and/or Python."""
        t = parse_torch(torch) if isinstance(torch, str) else torch
        c = parse_cuda(cuda) if isinstance(cuda, str) else cuda
        p = CPython.parse(python) if isinstance(python, str) else python
        return tuple(
            x
            for x in self.all_combos
            if (t is None or x.torch == t) and (c is None or x.cuda == c) and (p is None or x.python == p)
        )

    def select(self, sel: Selection) -> tuple[Combo, ...]:
        """The combos ``sel`` admits, limited to its ``newest`` torch minors among them."""
        picked = [c for c in self.all_combos if sel.admits(c)]
        if sel.newest is not None:
            keep = sorted({c.torch for c in picked}, reverse=True)[: sel.newest]
            picked = [c for c in picked if c.torch in keep]
        return tuple(picked)

    def is_shipped(self, label: Label) -> bool:
        """Whether PyTorch shipped (or serves) torch ``label.torch`` built with CUDA ``label.cuda``."""
        return any(c.torch == label.torch and c.cuda == label.cuda for c in self.all_combos)

    def status(self, label: Label) -> Status | None:
        """The most official status any cell of this combo has; ``None`` when never shipped."""
        found = [c.status for c in self.all_combos if c.torch == label.torch and c.cuda == label.cuda]
        return min(found, key=lambda s: s.rank) if found else None

    def cuda_lines_for(self, torch: str | MajorMinor) -> tuple[MajorMinor, ...]:
        """The CUDA lines shipped for a torch minor, oldest first."""
        return tuple(sorted({c.cuda for c in self.combos(torch=torch)}))

    def labels_for_torch(self, torch: str | MajorMinor) -> tuple[Label, ...]:
        """The labels of every combo shipped for a torch minor (``cu126torch2.8``, ...), oldest CUDA first."""
        t = parse_torch(torch) if isinstance(torch, str) else torch
        return tuple(Label(cuda, t) for cuda in self.cuda_lines_for(t))

    def torch_versions(self) -> tuple[MajorMinor, ...]:
        """Every torch minor in the matrix, newest first."""
        return tuple(sorted({c.torch for c in self.all_combos}, reverse=True))

    def is_partial(self, torch: MajorMinor) -> bool:
        """Whether this torch line's CUDA lines are known only in part: a release row read from a source that
        lists only some (PyPI), and no ``matrix refresh`` has read PyTorch's index for it since."""
        partial = any(t.partial for t in self.doc.torch if t.version == torch)
        return partial and not any(s.torch == torch for s in self.doc.served)

    def arch_list(
        self,
        cuda: str | MajorMinor,
        platform: Platform = Platform.LINUX_X86_64,
        torch: str | MajorMinor | None = None,
    ) -> ArchRow | None:
        """torch's own ``TORCH_CUDA_ARCH_LIST`` for a CUDA line: the row read for ``torch`` if there is one,
        else one of unknown releases, else the newest known for that line; ``None`` if none is known."""
        c = parse_cuda(cuda) if isinstance(cuda, str) else cuda
        t = parse_torch(torch) if isinstance(torch, str) else torch
        rows = [a for a in self.doc.arch if a.cuda == c and a.platform is platform]
        if t is not None:
            rows = [a for a in rows if t in a.torch] or [a for a in rows if not a.torch] or rows
        return max(rows, key=lambda a: max(a.torch, default=(0, 0)), default=None)

    def build_arch_list(
        self,
        cuda: MajorMinor,
        platform: Platform = Platform.LINUX_X86_64,
        torch: MajorMinor | None = None,
    ) -> ArchRow:
        """The arch list to build extensions for a combo: torch's own (:meth:`arch_list`), else one derived
        from the GPU data (every GPU of the platform that the CUDA line can target). Never empty."""
        row = self.arch_list(cuda, platform, torch)
        return row if row is not None else derived_arch_list(cuda, platform)


def derived_arch_list(cuda: MajorMinor, platform: Platform) -> ArchRow:
    """Every real GPU shipping beside the platform's CPU that CUDA ``cuda`` can target, as an arch list.

    For the combos no source gives torch's own list for (CUDA 11.8-12.4 on Linux, aarch64 before CUDA 13).
    """
    gpus = compiled_by(cuda, frozenset({platform.cpu}))
    arch_list = ";".join(format_version(g.capability) for g in gpus)
    return ArchRow(
        cuda, platform, arch_list, "derived from librarian/data/gpus.toml: no source gives torch's own list"
    )


# --- the one I/O part: where the files are, and reading them ----------------------------------------


def override_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's matrix override: ``$LIBRARIAN_MATRIX``, else ``$XDG_CONFIG_HOME/librarian/matrix.toml``."""
    return user_config_file("matrix.toml", "LIBRARIAN_MATRIX", environ)


def packaged_matrix() -> MatrixDoc:
    """The matrix shipped inside the package."""
    text = resources.files("librarian").joinpath("data/matrix.toml").read_text(encoding="utf-8")
    return parse_matrix(text, "librarian/data/matrix.toml")


MAX_OVERRIDE_BYTES = 8 << 20  # the packaged matrix is about 100 KB: an override is no bigger than a few


def read_override(path: Path) -> MatrixDoc | None:
    """The override file at ``path`` parsed, or ``None`` if there is none."""
    try:
        # A FIFO or device is refused by what it is, a file past the bound by its size: /dev/zero grew to 23 GB.
        text = read_regular(path, MAX_OVERRIDE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise BadInput(f"{path}: cannot read the matrix override ({reason})") from e
    return parse_matrix(text, str(path))


def load_matrix(override: Path | None = None) -> Matrix:
    """The packaged matrix merged with the user override (``override``, else :func:`override_path`)."""
    doc = packaged_matrix()
    user = read_override(override if override is not None else override_path())
    return Matrix(merge_matrix(doc, user) if user else doc)
