"""What publish refuses of one wheel, and why: a label PyTorch never shipped, METADATA or a ``.dist-info``
that contradicts the filename, bytes that contradict the name (each claim with the flag that accepts it,
all of them at once), and the GPU cells it is filed under (``--sm`` held to the judgement and to machines
that exist). Pure: a judgement in, cells or a refusal out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from librarian.coords import Cell, GpuArch, Label, MajorMinor, format_version
from librarian.demands import (
    ClaimKind,
    Demand,
    Wheel,
    cells,
    claims,
    judge_cell,
    no_cell_words,
    no_cuda,
    said_claims,
)
from librarian.errors import BadInput, BadWheel, Refused
from librarian.gpus import find_gpu
from librarian.platforms import parse_platform
from librarian.pytorch.matrix import Matrix
from librarian.wheel import WheelInfo, ownership_problem, said_of


def gpu_cells(
    wheel: Wheel, requested: Sequence[GpuArch], trust_sm: bool, source: str
) -> tuple[tuple[GpuArch, ...], bool]:
    """The GPUs a wheel is filed for, and whether ``--trust-sm`` was needed for them.

    ``--sm`` GPUs are checked against the judgement (each must run the wheel natively, by SASS), else
    every real GPU the judgement says it runs natively: ``sm_86`` SASS files it under sm86 and sm89,
    ``sm_90a`` under sm90 only, PTX alone under nothing (``pull --compatible`` finds such wheels).
    """
    label = wheel.name.label
    assert label is not None  # publish labels before it files
    if (why := no_cuda(wheel)) is not None:
        raise BadInput(f"{source}: {why}: it files no CUDA cell")
    has_code = wheel.facts is not None and any(b.has_kernels for b in wheel.facts.binaries)
    if requested:
        _refuse_impossible(wheel, requested, label.cuda, source)  # not even --trust-sm makes such a machine
        if not has_code:
            return tuple(sorted(set(requested))), False
        judged = [(sm, judge_cell(wheel, Cell(wheel.name.package, sm, label))) for sm in requested]
        failing = [sm for sm, j in judged if j.verdict(Demand.GPU).ok is not True]
        jit = [sm for sm, j in judged if j.verdict(Demand.GPU).ok is True and not j.native]
        if (failing or jit) and not trust_sm:
            offered = judged[0][1].verdict(Demand.GPU).wheel_needs
            if failing:
                what = f"have no code for {', '.join(f'sm{a.sm}' for a in failing)}"
            else:
                what = f"run on {', '.join(f'sm{a.sm}' for a in jit)} only by JIT-compiling PTX"
            raise Refused(
                f"{source}: its binaries {what} (they have {offered}); pass --trust-sm to file it there anyway"
            )
        return tuple(sorted(set(requested))), bool(failing or jit)
    if not has_code:
        raise BadInput(f"{source}: no GPU code found in its binaries; pass --sm to say which GPUs it is for")
    found = cells(wheel, label.cuda)
    if not found:
        why = no_cell_words(wheel.facts.archs if wheel.facts else ())
        raise BadInput(
            f"{source}: {why}; PTX alone files no cell: pass --sm to choose (pull --compatible finds it there)"
        )
    return tuple(c.sm for c in found), False


def _refuse_impossible(wheel: Wheel, requested: Sequence[GpuArch], cuda: MajorMinor, source: str) -> None:
    """BadInput for an ``--sm`` no machine of the wheel's CPU and CUDA line has."""
    for sm in requested:
        if problem := impossible_gpu(wheel, sm, cuda):
            raise BadInput(f"{source}: --sm {sm.sm}: {problem}")


def impossible_gpu(wheel: Wheel, sm: GpuArch, cuda: MajorMinor) -> str | None:
    """Why no machine of the wheel's CPU and CUDA line has the GPU ``sm`` (a Jetson beside an x86_64 CPU, a
    GPU whose drivers never reach the wheel's CUDA line: the GPU table's data), or ``None``."""
    real = find_gpu(sm.capability)
    if real is None:
        return None
    hosts = [b.cpu for b in wheel.facts.binaries if b.format.is_host and b.cpu] if wheel.facts else []
    cpus = set(hosts) or {
        c for t in wheel.name.platform_tag.split(".") if (c := parse_platform(t).cpu) is not None
    }
    if cpus and (problem := real.cpu_problem(frozenset(cpus))):
        return f"{real.examples} {problem}, and this wheel is for {', '.join(sorted(cpus))}: no machine runs it there"
    if problem := real.driver_problem(cuda):
        return f"{real.examples} {problem}; this wheel is for CUDA {format_version(cuda)}"
    return None


def check_combo(label: Label, name: str, matrix: Matrix) -> str | None:
    """Refuse a (torch, CUDA) combo that PyTorch never shipped; the warning to give instead when the matrix
    cannot know: a torch line newer than all it lists, or one whose CUDA lines it knows only in part."""
    if matrix.is_shipped(label):
        return None
    torch = format_version(label.torch)
    known = matrix.torch_versions()
    if not known or label.torch > known[0]:
        newest = format_version(known[0]) if known else "none"
        return (
            f"torch {torch} is newer than every line librarian's matrix knows (newest: {newest}); "
            f"{label} is taken on trust: run 'librarian matrix refresh' to read PyTorch's index"
        )
    shipped = ", ".join(str(l) for l in matrix.labels_for_torch(label.torch)) or "none known"
    if matrix.is_partial(label.torch):
        return (
            f"torch {torch}'s CUDA lines are known only in part ({shipped}); {label} is taken on trust: "
            "run 'librarian matrix refresh' to read PyTorch's index"
        )
    raise Refused(f"{name}: {never_shipped(label, matrix)} (pass --allow-unknown-combo if you know better)")


def never_shipped(label: Label, matrix: Matrix) -> str:
    """Pure: the words for a combo the matrix says PyTorch never shipped."""
    shipped = ", ".join(str(l) for l in matrix.labels_for_torch(label.torch)) or "none known"
    return f"PyTorch never shipped {label}; for torch {format_version(label.torch)} it shipped {shipped}"


def check_claims(wheel: Wheel, accepts: Callable[[str], bool], source: str) -> tuple[str, ...]:
    """Refuse a wheel whose bytes contradict its name, naming every such claim and each flag that accepts
    it, in one run (one run to learn a wheel wants two flags, not two); ``accepts``: whether an override
    flag was passed. Return the flags that did accept one (the entry records them, and verify reports them as accepted)."""
    used: list[str] = []
    refused: list[tuple[str, str]] = []
    for claim in claims(wheel):
        if not claim.flag:  # METADATA and WHEEL were checked (and WHEEL repaired) before relabelling
            raise BadWheel(f"{source}: {claim}")
        if not accepts(claim.flag):
            refused.append((str(claim), claim.flag))
        else:
            used.append(claim.flag)
    if refused:
        flags = " ".join(dict.fromkeys(flag for _, flag in refused))
        what = "; ".join(text for text, _ in refused)
        named = tuple(dict.fromkeys(flag for _, flag in refused))
        raise Refused(f"{source}: {what}; pass {flags} to publish it anyway", named)
    return tuple(dict.fromkeys(used))


def check_said(path: Path, info: WheelInfo) -> bool:
    """Refuse a wheel whose METADATA or ``.dist-info`` contradicts its filename (no flag accepts that);
    return whether WHEEL's ``Tag:`` lines disagree, which publish repairs while it rewrites the dist-info."""
    name = info.filename
    expected = f"{name.distribution}-{name.version}.dist-info"
    if info.dist_info != expected:
        raise BadWheel(f"{path}: its .dist-info is {info.dist_info}, expected {expected}")
    if (foreign := ownership_problem(name, (m.path for m in info.members))) is not None:
        raise BadWheel(f"{path}: {foreign}")  # named by the member as given, before any relabel
    found = said_claims(name, said_of(info))
    if wrong := [c for c in found if c.kind is not ClaimKind.TAGS]:
        raise BadWheel(f"{path}: {wrong[0]}")
    return bool(found)
