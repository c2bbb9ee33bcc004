"""Which label a wheel gets: its own, the flags', or the installed torch's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from librarian.coords import Label, MajorMinor, WheelName
from librarian.errors import BadInput, Refused
from librarian.probe import detect_target_torch
from librarian.probe.target import Target, find_target


def label_from_flags(
    cuda: MajorMinor | None, torch: MajorMinor | None, target: Target | None = None
) -> Label | None:
    """The label ``--cuda/--torch`` ask for; when neither is given, the target's installed torch's; else ``None``.

    Only one of the two given: the other comes from the installed torch, if its line agrees. The target is
    ``--python PATH``, else the active virtual environment, else librarian's own interpreter.
    """
    if cuda is not None and torch is not None:
        return Label(cuda, torch)
    info = detect_target_torch(target or find_target(None))
    if info is not None and info.cuda is None:
        raise BadInput(f"torch {info.version} installed here is a CPU build; pass --cuda and --torch")
    if info is None or info.cuda is None:
        if cuda is None and torch is None:
            return None
        missing = "--torch" if torch is None else "--cuda"
        raise BadInput(f"{missing}: needed too (no CUDA build of torch is installed here to take it from)")
    if torch is not None and torch != info.minor:
        # The installed torch's CUDA line says nothing about another torch line's build.
        raise BadInput(
            f"--cuda: needed too (the installed torch {info.version} is not torch {torch[0]}.{torch[1]})"
        )
    return Label(cuda or info.cuda, torch or info.minor)


def choose_label(name: WheelName, wanted: Label | None, *, relabel: bool = False) -> Label:
    """The label ``name`` ends up with; refuses to relabel a wheel that carries another label unless ``relabel``."""
    claim = name.label_claim
    current = name.label
    if current is not None and (wanted is None or wanted == current):
        return current
    if wanted is None:
        if claim is not None:
            raise BadInput(
                f"{name}: carries {claim}, not a librarian label; pass --cuda, --torch and --relabel"
            )
        raise BadInput(
            f"{name}: has no label; pass --cuda and --torch (or install the torch it was built with)"
        )
    if claim is not None and not relabel:
        if claim.form == "librarian" and current is not None:
            what = f"is labelled {current}"
        else:
            what = f"carries {claim} (+{name.version.local})"
        raise Refused(f"{name}: {what}, not {wanted}; pass --relabel to relabel it")
    return wanted


def any_unlabelled(paths: Sequence[Path]) -> bool:
    """Whether a wheel among ``paths`` has no label of its own (so one must come from flags or the torch)."""
    return any(WheelName.parse(p.name).label is None for p in paths if p.name.endswith(".whl"))
