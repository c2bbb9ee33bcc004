"""The wheel-variant format's names, written once (PEP 817 / PEP 825 drafts, as uv 0.13.9 reads them), and
the variant label as a value with its parser and printer. Pure; the standard library only.

A label names one *build*, never a store cell: ``sm75_120.1f2e3d4c`` is the GPU span its ``nvidia``
properties say (lowest to highest ``sm_arch`` value; ``nogpu`` where they say none) and the first eight hex
digits of a digest of what the variant wheel holds (its members' RECORD hashes, its METADATA and its
properties). The same build filed under eight cells is one variant wheel; two builds of a release are two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# PEP 850's v0.2.0 schema, which uv 0.13.9 reads; PEP 825's v0.1.1 (uv reads it too) is what variant wheels
# made before this schema carry: still read, and judged faithful. The document's shape is one under both.
SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
READ_SCHEMAS = (SCHEMA_URL, "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json")
VARIANT_JSON = "variant.json"  # the member a variant wheel adds to its .dist-info
VARIANTS_DIR = "variants"  # generated: each release's variants.json and each package's find-links page
VARIANT_WHEELS_DIR = "variant-wheels"  # the variant wheels, one per build: variant-wheels/<package>/<file>
# The properties' names: namespaces, in priority order (the GPU first, then the torch line), and features.
NVIDIA = "nvidia"
ABI_DEPENDENCY = "abi_dependency"
NAMESPACES = (NVIDIA, ABI_DEPENDENCY)
SM_ARCH = "sm_arch"  # nvidia :: sm_arch, values SmArchValue
CUDA_FLOOR = "cuda_version_lower_bound"  # nvidia :: cuda_version_lower_bound, values "12.0"
TORCH = "torch"  # abi_dependency :: torch, values "2.9"
PROVIDERS: Mapping[str, Mapping[str, object]] = {
    "nvidia": {
        "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
        "requires": ["nvidia-variant-provider"],
    },
    "abi_dependency": {"builtin": "abi_dependency"},
}
LABEL_CHARS = re.compile(r"[0-9a-z_.]+")  # what PEP 825 (and uv) accept in a label
_ARCH = r"\d+[af]?"
_LABEL = re.compile(rf"(?P<gpus>sm(?P<lo>{_ARCH})(?:_(?P<hi>{_ARCH}))?|nogpu)\.(?P<build>[0-9a-f]{{8}})")
_SM_VALUE = re.compile(rf"({_ARCH})_(real|virtual)")
NO_GPU = "nogpu"


def _arch_key(arch: str) -> tuple[int, str]:
    digits = arch.rstrip("af")
    return int(digits), arch[len(digits) :]


@dataclass(frozen=True, slots=True)
class SmArchValue:
    """One ``nvidia :: sm_arch`` value: ``89_real`` (SASS of sm 8.9), ``120_virtual`` (PTX of 12.0), as uv's
    NVIDIA provider reports them; ``arch`` is the number with its suffix (``90a``), ``real`` SASS or PTX."""

    arch: str
    real: bool

    def __post_init__(self) -> None:
        if not re.fullmatch(_ARCH, self.arch):
            raise ValueError(f"not an sm_arch value's arch: {self.arch!r}")

    def __str__(self) -> str:
        return f"{self.arch}_{'real' if self.real else 'virtual'}"

    @classmethod
    def parse(cls, text: str) -> SmArchValue:
        """``89_real`` -> the value (ValueError on anything else)."""
        m = _SM_VALUE.fullmatch(text)
        if m is None:
            raise ValueError(f"not an sm_arch value: {text!r} (expected NN_real or NN_virtual)")
        return cls(m[1], text.endswith("_real"))

    @classmethod
    def of(cls, major: int, minor: int, real: bool) -> SmArchValue:
        return cls(str(major * 10 + minor), real)

    @property
    def capability(self) -> tuple[int, int]:
        """The GPU it names, ``(8, 9)`` (its suffix aside)."""
        number = int(self.arch.rstrip("af"))
        return number // 10, number % 10

    @property
    def order(self) -> tuple[bool, int, str]:
        """Real before virtual, then by arch: the order a variant lists them in."""
        return (not self.real, *_arch_key(self.arch))


@dataclass(frozen=True, slots=True)
class VariantLabel:
    """One build's label: the GPU span its properties say, and its build digest (8 hex digits)."""

    gpus: str  # "sm89", "sm75_120", "sm90a", "nogpu"
    build: str

    def __post_init__(self) -> None:
        if not _LABEL.fullmatch(f"{self.gpus}.{self.build}"):
            raise ValueError(f"not a variant label: {self.gpus}.{self.build}")

    def __str__(self) -> str:
        return f"{self.gpus}.{self.build}"

    @classmethod
    def parse(cls, text: str) -> VariantLabel:
        """``sm75_120.1f2e3d4c`` -> the label (ValueError on anything else, an old cell label included)."""
        m = _LABEL.fullmatch(text)
        if m is None:
            raise ValueError(
                f"not a variant label: {text!r} (expected sm<arch>[_<arch>].<8 hex> or nogpu.<8 hex>)"
            )
        return cls(m["gpus"], m["build"])

    @classmethod
    def of(cls, sm_values: Iterable[str], digest: str) -> VariantLabel:
        """The label of a build whose ``nvidia :: sm_arch`` values are ``sm_values``, digest ``digest`` (hex)."""
        archs = sorted({m[1] for v in sm_values if (m := _SM_VALUE.fullmatch(v))}, key=_arch_key)  # the span
        if not archs:
            gpus = NO_GPU
        elif archs[0] == archs[-1]:
            gpus = f"sm{archs[0]}"
        else:
            gpus = f"sm{archs[0]}_{archs[-1]}"
        return cls(gpus, digest[:8].lower())


def parse_label(text: str) -> VariantLabel | None:
    """The label ``text`` is, or ``None``."""
    try:
        return VariantLabel.parse(text)
    except ValueError:
        return None


def variant_wheel_path(package: str, filename: str) -> str:
    """Where a variant wheel is filed: ``variant-wheels/flash_attn/<filename>``, once per build."""
    return f"{VARIANT_WHEELS_DIR}/{package}/{filename}"


def is_variant_wheel_path(path: str) -> bool:
    """Whether a store path is under the variant wheels' folder (never a stored wheel of the layout)."""
    return path.startswith(f"{VARIANT_WHEELS_DIR}/")


__all__ = [
    "ABI_DEPENDENCY",
    "CUDA_FLOOR",
    "LABEL_CHARS",
    "NAMESPACES",
    "NO_GPU",
    "NVIDIA",
    "PROVIDERS",
    "READ_SCHEMAS",
    "SCHEMA_URL",
    "SM_ARCH",
    "TORCH",
    "VARIANTS_DIR",
    "VARIANT_JSON",
    "VARIANT_WHEELS_DIR",
    "SmArchValue",
    "VariantLabel",
    "is_variant_wheel_path",
    "parse_label",
    "variant_wheel_path",
]
