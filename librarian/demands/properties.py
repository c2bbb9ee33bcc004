"""A wheel's wheel-variant properties (PEP 817 / PEP 825 drafts), said in the words uv 0.13.9 selects by. Pure.

Every value comes from the one judgement over the bytes, never from the label alone:

- ``nvidia :: sm_arch``: each SASS arch of the members that load, as ``NN_real``, and each PTX arch as
  ``NN_virtual``, with ``M0_virtual`` of every later GPU generation its PTX reaches by JIT (compute_80 PTX
  says ``90_virtual``, ``100_virtual``, ``120_virtual`` too: the value each of those GPUs reports). uv's NVIDIA provider reports ``NN_real`` for every arch of the GPU's major at or below
  its own minor, and ``N0_virtual`` for its major only. A value is said only where the judgement runs the
  wheel, every member of it, on every known GPU that value would select (so a wheel whose second member
  lacks ``sm_90`` never says ``90_real``: uv shows no "runs, partly" note). ``f`` code (``sm_100f``) runs across its family exactly as the provider's ``100_real``
  selects, so it is said so; ``a`` code (``sm_90a``) runs on that one GPU, which the provider has no value
  for, so it is left out with a reason, and a wheel left with no GPU value at all gets no variant.
- ``nvidia :: cuda_version_lower_bound``: the driver floor the judgement uses for the code uv would pick:
  ``X.0`` of the CUDA major that built it where SASS serves every GPU its values select (CUDA minor-version
  compatibility), the toolkit's own version where some GPU would JIT its PTX (the driver must know the ISA).
- ``abi_dependency :: torch``: its torch line for a build bound to it; every known line from its floor for a
  stable-ABI build; nothing for a build that links no torch. Versions as ``2.9`` (major.minor): how
  variantlib matches an installed torch. The CUDA line of torch cannot be said (``2.9.1+cu128`` and
  ``2.9.1+cu130`` are one version to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from librarian.coords import ArchKind, GpuArch, MajorMinor, format_version
from librarian.demands import gpu, torch
from librarian.demands.base import Wheel
from librarian.demands.judgement import platform_gpus
from librarian.demands.members import seen
from librarian.machine import one_gpu_machine
from librarian.variant_format import ABI_DEPENDENCY, CUDA_FLOOR, NVIDIA, SM_ARCH, TORCH, SmArchValue

Property = tuple[str, str, tuple[str, ...]]  # (namespace, feature, values): a feature holds if any value does


@dataclass(frozen=True, slots=True)
class Properties:
    """What a variant of a wheel declares, and what the bytes have that it cannot say (and why)."""

    values: tuple[Property, ...]
    left_out: tuple[str, ...] = ()
    device_code: bool = False  # the wheel carries GPU code: a variant must then say where it runs
    unknown_torch: bool = False  # it links torch, and no line is known to say

    @property
    def says_gpu(self) -> bool:
        """Whether it names at least one GPU arch."""
        return any(ns == NVIDIA and feature == SM_ARCH for ns, feature, _ in self.values)

    @property
    def unsayable(self) -> str | None:
        """Why no variant can stand for this wheel (``None``: one can): GPU code that no value says."""
        if self.device_code and not self.says_gpu:
            return "no sm_arch value says where its GPU code runs (" + "; ".join(self.left_out) + ")"
        if self.unknown_torch:
            return "it links torch, and its label names no torch line"
        return None


def _value(arch: GpuArch) -> SmArchValue:
    return SmArchValue.of(arch.major, arch.minor, arch.kind is ArchKind.SASS)


def _reach(value: SmArchValue, capabilities: Sequence[MajorMinor]) -> tuple[MajorMinor, ...]:
    """The GPUs among ``capabilities`` (those a machine running the wheel can have) that uv's NVIDIA provider
    selects a wheel for by ``value`` (its own rule, probed in uv 0.13.9)."""
    major, minor = value.capability
    if value.real:
        return tuple(c for c in capabilities if c[0] == major and c[1] >= minor)
    return tuple(c for c in capabilities if c[0] == major) if minor == 0 else ()


def _gpu_values(
    need: gpu.GpuNeed, line: MajorMinor | None, gpus: Sequence[MajorMinor]
) -> tuple[list[str], list[str]]:
    """The sm_arch values the judgement stands behind, and the reasons for the archs it cannot say; ``gpus``:
    the GPUs a machine running the wheel can have (its CPUs', with a driver for its CUDA line)."""
    archs: dict[SmArchValue, GpuArch] = {}
    left_out: list[str] = []
    for member in need.code.all_members:
        for arch in (*member.sass, *member.ptx):
            if arch.suffix == "a":
                # sm_90a runs on sm90 alone: said as 90_real where that value reaches no other known GPU.
                reach = _reach(_value(arch), gpus)
                if arch.kind is not ArchKind.SASS or reach != ((arch.major, arch.minor),):
                    others = ", ".join(f"sm{c[0]}{c[1]}" for c in reach if c != (arch.major, arch.minor))
                    left_out.append(
                        f"{arch}: arch-specific code, and uv's NVIDIA provider has no value for it alone"
                        + (f" ({_value(arch)} reaches {others} too)" if others else "")
                    )
                    continue
            archs.setdefault(_value(arch), arch)
    # PTX runs by JIT on every later generation too (compute_80 on sm90, sm100, sm120), which the provider
    # says by each GPU's own N0_virtual: those values are said where the judgement runs the wheel there.
    jit = {
        SmArchValue.of(major, 0, real=False)
        for arch in archs.values()
        if arch.kind is ArchKind.PTX
        for major in {c[0] for c in gpus}
        if major > arch.major
    } - set(archs)
    said: list[str] = []
    for value in sorted({*archs, *jit}, key=lambda v: v.order):
        reach = _reach(value, gpus)
        if not reach and value in jit:
            continue
        if not reach:  # 75_virtual, 89_virtual: a value no GPU's provider reports could never be chosen
            left_out.append(f"{value}: no GPU's NVIDIA provider reports it (PTX is said N0_virtual only)")
            continue
        failing = [c for c in reach if not _runs(need, c, line)]
        if failing and value in jit:  # a later generation its PTX does not reach wholly: not said, no loss
            continue
        if failing:
            where = ", ".join(f"sm{c[0]}{c[1]}" for c in failing)
            left_out.append(f"{value}: the judgement does not run it wholly on {where}")
        else:
            said.append(str(value))
    return said, left_out


def _needs_jit(said: Sequence[str], gpus: Sequence[MajorMinor]) -> bool:
    """Whether some GPU the values select would run the build's PTX, not its SASS: a ``N0_virtual`` value
    reaching a GPU no ``_real`` value of the build reaches (cupy's ``120_virtual`` beside ``120_real`` does
    not: SASS serves every GPU it selects, and SASS runs on any driver of its CUDA major)."""
    values = [SmArchValue.parse(v) for v in said]
    by_sass = {c for v in values if v.real for c in _reach(v, gpus)}
    return any(c not in by_sass for v in values if not v.real for c in _reach(v, gpus))


def _runs(need: gpu.GpuNeed, capability: MajorMinor, line: MajorMinor | None) -> bool:
    verdict, _ = gpu.judge(need, one_gpu_machine(capability, "variant", line))
    return verdict.ok is True and not verdict.partly  # uv shows no note: a member without code is a failure


def properties(wheel: Wheel, torch_lines: Sequence[MajorMinor] = ()) -> Properties:
    """The variant properties of ``wheel``; ``torch_lines``: the torch lines known (a stable-ABI build
    declares each from its floor on)."""
    line = gpu.needs(wheel).label_cuda
    view = seen(wheel, line)
    need = gpu.needs(view.nvidia)
    values: list[Property] = []
    left_out: list[str] = []
    if not need.code.empty:
        toolkit = view.loaded.facts.toolkit if view.loaded.facts is not None else None
        gpus = [g.capability for g in platform_gpus(view.loaded, line or toolkit)]
        said, left_out = _gpu_values(need, line, gpus)
        if said:
            values.append((NVIDIA, SM_ARCH, tuple(said)))
        # The members this CUDA line loads: bitsandbytes' cu128 build is its libbitsandbytes_cuda128.so,
        # not the newest of its alternatives.
        bound = toolkit or line
        if bound is not None:
            # The judgement's own driver floor: SASS runs on any driver of its CUDA major (minor-version
            # compatibility, as pull and doctor say); PTX a GPU would JIT needs a driver that knows its ISA.
            floor = bound if _needs_jit(said, gpus) else (bound[0], 0)
            values.append((NVIDIA, CUDA_FLOOR, (format_version(floor),)))
    binding = torch.needs(view.loaded)
    if binding.binding is torch.Binding.EXACT and binding.minor is not None:
        values.append((ABI_DEPENDENCY, TORCH, (format_version(binding.minor),)))
    elif binding.binding is torch.Binding.STABLE and binding.first_line is not None:
        floor = binding.first_line
        lines = sorted({t for t in torch_lines if t[0] == floor[0] and t >= floor} | {floor})
        values.append((ABI_DEPENDENCY, TORCH, tuple(format_version(t) for t in lines)))
    unknown_torch = binding.links and binding.minor is None
    if unknown_torch:
        left_out.append("torch: it links torch, and its label names no torch line")
    return Properties(tuple(values), tuple(dict.fromkeys(left_out)), not need.code.empty, unknown_torch)
