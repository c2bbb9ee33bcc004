"""The coordinates of a wheel: GPU arch, CUDA line, torch minor, label, wheel name and cell.

Pure values, parsed at the edges and written back by ``__str__`` (``str(X.parse(s)) == s`` for
canonical text). Names, versions and tags are parsed by ``packaging``; nothing here re-implements it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from librarian.errors import BadInput

MajorMinor = tuple[int, int]


def package_key(name: str) -> str:
    """The name pip matches by, spelled as wheel filenames and layouts spell it: ``flash-attn`` -> ``flash_attn``."""
    return canonicalize_name(name).replace("-", "_")


def _digits_to_major_minor(digits: str) -> MajorMinor:
    # Compute capabilities and CUDA lines are written with the last digit as the minor:
    # 89 -> 8.9, 120 -> 12.0, 128 -> 12.8, 130 -> 13.0.
    return int(digits[:-1]), int(digits[-1])


def parse_cuda(text: str) -> MajorMinor:
    """A CUDA line from ``12.8``, ``128``, ``cu128`` or ``12.8.1`` -> ``(12, 8)``."""
    raw = text.strip().lower().removeprefix("cu")
    if m := re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", raw):
        return int(m[1]), int(m[2])
    if re.fullmatch(r"\d{2,3}", raw):
        return _digits_to_major_minor(raw)
    raise BadInput(f"{text}: not a CUDA version (expected e.g. 12.8 or cu128)")


def parse_torch(text: str) -> MajorMinor:
    """A torch minor from ``2.8``, ``2.8.0``, ``2.8.0+cu128`` or ``torch2.8`` -> ``(2, 8)``."""
    raw = text.strip().lower().removeprefix("torch")
    if m := re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?(?:(?:a|b|rc|\.dev|\.post)\d+)*(?:\+[a-z0-9.]+)?", raw):
        return int(m[1]), int(m[2])
    raise BadInput(f"{text}: not a torch version (expected e.g. 2.8)")


def version_of(text: str) -> Version | None:
    """A PEP 440 version from text METADATA gives, or ``None`` where it is not one."""
    try:
        return Version(text)
    except InvalidVersion:
        return None


def format_cuda(cuda: MajorMinor) -> str:
    """``(12, 8)`` -> ``128``, the form labels and layouts use."""
    return f"{cuda[0]}{cuda[1]}"


def format_version(v: MajorMinor) -> str:
    """``(2, 8)`` -> ``2.8``."""
    return f"{v[0]}.{v[1]}"


def format_dotted(v: tuple[int, ...]) -> str:
    """Any number of parts: ``(2, 2, 5)`` -> ``2.2.5`` (symbol versions keep all of theirs)."""
    return ".".join(str(x) for x in v)


class ArchKind(enum.Enum):
    """What a GPU arch names: machine code (SASS), PTX for the JIT, or LTO-IR for the device linker."""

    SASS = "sm"
    PTX = "compute"
    LTO = "lto"


# The SM numbers a compiler emits: sm_10 (the first CUDA GPU) up to the 19.x family. A number outside is
# a corrupt arch field (a flipped byte made ``sm_2197815386``), never a GPU. Well-formed numbers that no
# GPU has (``sm_101``) are kept: the readers and the index share this one rule (``GpuArch`` checks it).
SM_NUMBERS = range(10, 200)
ARCH_SUFFIXES = ("", "a", "f")


def is_sm_number(number: int) -> bool:
    """Whether ``number`` is an SM number a compiler can emit (:data:`SM_NUMBERS`)."""
    return number in SM_NUMBERS


@dataclass(frozen=True, slots=True, order=True)
class GpuArch:
    """``sm_89``, ``sm_90a``, ``sm_100f``, ``compute_80``: one target of device code.

    ``suffix`` is ``""``, ``"a"`` (arch-specific: runs only on exactly that GPU) or ``"f"``
    (family-specific: same major, minor >= this minor).
    """

    major: int
    minor: int
    suffix: str = ""
    kind: ArchKind = ArchKind.SASS

    _PATTERN = re.compile(r"(?:(sm|compute|lto)_?)?(\d{2,3})([af]?)")

    def __post_init__(self) -> None:
        # Every arch that exists is made here, from bytes, the index or a flag: an impossible one stops here.
        if (
            not (0 <= self.minor <= 9 and is_sm_number(self.major * 10 + self.minor))
            or self.suffix not in ARCH_SUFFIXES
        ):
            raise BadInput(
                f"{self.kind.value}_{self.major * 10 + self.minor}{self.suffix}: no compiler emits this GPU arch"
            )

    @classmethod
    def parse(cls, text: str) -> GpuArch:
        """Parse ``sm_89``, ``sm89``, ``89``, ``90a``, ``compute_80``, ``lto_90`` or ``8.9``."""
        raw = text.strip().lower()
        if m := re.fullmatch(r"(\d+)\.(\d)", raw):
            return cls(int(m[1]), int(m[2]))
        m = cls._PATTERN.fullmatch(raw)
        if m is None:
            raise BadInput(f"{text}: not a GPU arch (expected e.g. sm_89, 90a or compute_80)")
        major, minor = _digits_to_major_minor(m[2])
        kind = ArchKind(m[1]) if m[1] else ArchKind.SASS
        return cls(major, minor, m[3], kind)

    @classmethod
    def from_number(cls, number: int, suffix: str = "", kind: ArchKind = ArchKind.SASS) -> GpuArch:
        """The arch whose SM number is ``number`` (``89`` -> 8.9)."""
        return cls(number // 10, number % 10, suffix, kind)

    @property
    def number(self) -> int:
        """``89`` for sm_89, ``120`` for sm_120."""
        return self.major * 10 + self.minor

    @property
    def sm(self) -> str:
        """The layout's spelling: ``89``, ``90a``, ``120f``."""
        return f"{self.number}{self.suffix}"

    @property
    def capability(self) -> MajorMinor:
        """The compute capability this code is for: ``(8, 9)``."""
        return self.major, self.minor

    def __str__(self) -> str:
        return f"{self.kind.value}_{self.sm}"


@dataclass(frozen=True, slots=True, order=True)
class Label:
    """The local version label ``cu128torch2.8``: the CUDA line and torch minor a wheel was built for."""

    cuda: MajorMinor
    torch: MajorMinor

    @classmethod
    def parse(cls, text: str) -> Label:
        """Parse our canonical form, ``cu128torch2.8``; see :func:`parse_label_claim` for foreign forms."""
        m = re.fullmatch(r"cu(\d{2,3})torch(\d+)\.(\d+)", text.strip().lower())
        if m is None:
            raise BadInput(f"{text}: not a librarian label (expected e.g. cu128torch2.8)")
        return cls(_digits_to_major_minor(m[1]), (int(m[2]), int(m[3])))

    @property
    def combo(self) -> str:
        """The layout's combo folder suffix parts: ``torch2.8-cu128``."""
        return f"torch{format_version(self.torch)}-cu{format_cuda(self.cuda)}"

    def __str__(self) -> str:
        return f"cu{format_cuda(self.cuda)}torch{format_version(self.torch)}"


@dataclass(frozen=True, slots=True)
class LabelClaim:
    """What a local label says, in whatever form a project used; parts it does not say are ``None``.

    ``form`` names the convention: ``librarian`` (``cu128torch2.8``), ``flash-attn``
    (``cu12torch2.8cxx11abiTRUE``: CUDA major only), ``pyg`` (``pt28cu128``), ``pytorch`` (``cu128``).
    """

    form: str
    cuda_major: int
    cuda_minor: int | None
    torch: MajorMinor | None
    cxx11abi: bool | None = None

    @classmethod
    def of_path(cls, label: Label) -> LabelClaim:
        """What a wheelhouse path (``.../torch2.9-cu128/...``) claims of an unlabelled wheel filed there: the
        same as the label ``+cu128torch2.9`` would (``form`` ``path``, so that words say who claims it)."""
        return cls("path", label.cuda[0], label.cuda[1], label.torch)

    @property
    def said_by(self) -> str:
        """Who makes the claim, as a sentence says it: ``label``, or ``path`` for an unlabelled wheel's cell."""
        return "path" if self.form == "path" else "label"

    @property
    def cuda_line(self) -> MajorMinor | None:
        """The full CUDA line the claim gives, ``None`` where it gives only the major."""
        return (self.cuda_major, self.cuda_minor) if self.cuda_minor is not None else None

    def to_label(self, cuda: MajorMinor | None = None, torch: MajorMinor | None = None) -> Label:
        """Complete this claim into a :class:`Label`, filling gaps from ``cuda``/``torch``; conflicts raise."""
        if cuda is not None and (
            cuda[0] != self.cuda_major or (self.cuda_minor is not None and cuda[1] != self.cuda_minor)
        ):
            raise BadInput(f"{self}: says CUDA {self.cuda_text}, not {format_version(cuda)}")
        if torch is not None and self.torch is not None and torch != self.torch:
            raise BadInput(f"{self}: says torch {format_version(self.torch)}, not {format_version(torch)}")
        full_cuda = cuda or self.cuda_line
        full_torch = torch or self.torch
        if full_cuda is None:
            raise BadInput(f"{self}: gives only CUDA {self.cuda_major}; pass --cuda {self.cuda_major}.X")
        if full_torch is None:
            raise BadInput(f"{self}: gives no torch version; pass --torch")
        return Label(full_cuda, full_torch)

    @property
    def cuda_text(self) -> str:
        """``12.8``, or ``12`` where the minor is not said."""
        return f"{self.cuda_major}" if self.cuda_minor is None else f"{self.cuda_major}.{self.cuda_minor}"

    def __str__(self) -> str:
        torch = f" torch {format_version(self.torch)}" if self.torch else ""
        what = "its path" if self.form == "path" else f"{self.form} label"
        return f"{what} (CUDA {self.cuda_text}{torch})"


_FOREIGN_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("librarian", re.compile(r"cu(?P<cuda>\d{2,3})torch(?P<tmaj>\d+)\.(?P<tmin>\d+)")),
    (
        "flash-attn",
        re.compile(r"cu(?P<cmaj>\d{2})torch(?P<tmaj>\d+)\.(?P<tmin>\d+)cxx11abi(?P<abi>true|false)"),
    ),
    ("pyg", re.compile(r"pt(?P<tmaj>\d)(?P<tmin>\d+)cu(?P<cuda>\d{2,3})")),
    ("pytorch", re.compile(r"cu(?P<cuda>\d{2,3})")),
)


def parse_label_claim(local: str) -> LabelClaim | None:
    """Recognise a local version label in any known form; ``None`` if it carries no CUDA line."""
    text = local.strip().lower().replace("_", ".").replace("-", ".")
    for form, pattern in _FOREIGN_FORMS:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("cuda"):
            cmaj, cmin = _digits_to_major_minor(groups["cuda"])
            minor: int | None = cmin
        else:
            cmaj, minor = int(groups["cmaj"]), None
        torch = (int(groups["tmaj"]), int(groups["tmin"])) if groups.get("tmaj") else None
        abi = None if groups.get("abi") is None else groups["abi"] == "true"
        return LabelClaim(form, cmaj, minor, torch, abi)
    return None


@dataclass(frozen=True, slots=True)
class WheelName:
    """A wheel filename, kept exactly as written so that it round-trips.

    ``distribution`` is the filename's own spelling (``flash_attn``); :attr:`package` is the key pip
    matches by. The tag triple is kept as text (``cp312-cp312-linux_x86_64``) since a set of tags
    loses the compressed form's order.
    """

    distribution: str
    version: Version
    build: str
    tag_text: str

    @classmethod
    def parse(cls, filename: str) -> WheelName:
        """Parse ``flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl``."""
        try:
            parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion) as e:
            raise BadInput(f"{filename}: not a wheel filename ({e})") from e
        parts = filename[: -len(".whl")].split("-")
        build = parts[2] if len(parts) == 6 else ""
        return cls(parts[0], Version(parts[1]), build, "-".join(parts[-3:]))

    @property
    def package(self) -> str:
        """The name pip matches by, with underscores: ``flash_attn``."""
        return package_key(self.distribution)

    @property
    def tags(self) -> frozenset[Tag]:
        """Every (python, abi, platform) tag this wheel claims."""
        return parse_tag(self.tag_text)

    @property
    def python_tag(self) -> str:
        """``cp312``, or ``cp310.cp311`` for a compressed set."""
        return self.tag_text.split("-")[0]

    @property
    def platform_tag(self) -> str:
        """``linux_x86_64``, ``manylinux_2_28_aarch64``, ``win_amd64``."""
        return self.tag_text.split("-")[2]

    @property
    def label_claim(self) -> LabelClaim | None:
        """What the version's local label claims, in any known form."""
        return parse_label_claim(self.version.local) if self.version.local else None

    @property
    def label(self) -> Label | None:
        """The librarian label (``+cu128torch2.8``), or ``None`` when the version carries another or none."""
        claim = self.label_claim
        if claim is None or claim.form != "librarian":
            return None
        return claim.to_label()

    def with_label(self, label: Label) -> WheelName:
        """The same wheel with ``+<label>`` as its local version (any previous local part replaced)."""
        return replace(self, version=Version(f"{self.version.public}+{label}"))

    def __str__(self) -> str:
        build = f"-{self.build}" if self.build else ""
        return f"{self.distribution}-{self.version}{build}-{self.tag_text}.whl"


@dataclass(frozen=True, slots=True, order=True)
class Cell:
    """One place in the layout: (package, sm, torch, CUDA). The filename adds python/abi/platform."""

    package: str
    sm: GpuArch
    label: Label

    def __post_init__(self) -> None:
        if self.sm.kind is not ArchKind.SASS:
            raise BadInput(
                f"{self.sm}: a cell is for a real GPU, so its arch is sm_XX, not {self.sm.kind.value}"
            )

    def __str__(self) -> str:
        return f"{self.package} sm{self.sm.sm} {self.label.combo}"
