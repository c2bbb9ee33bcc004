"""Detect this machine: GPUs and driver (``gpus``), installed torch (``torch``), C libraries (``libc``), and the
target interpreter (``target``); :func:`detect_machine` puts them together.

The one impure part of the judging path. Every part degrades to "unknown, and why" instead of raising:
a laptop without a GPU, a container without torch, musl: all must still get a report. Torch is read from
its installed files, never imported (importing it takes seconds and may itself fail on this machine).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from packaging.tags import Tag, sys_tags

from librarian.coords import MajorMinor
from librarian.machine import Machine, Probed, TorchInfo, interpreter_tags
from librarian.platforms import canonical_cpu, linux_platforms
from librarian.probe.libc import detect_glibc, detect_glibcxx
from librarian.probe.nvidia import NO_DRIVER, NO_GPU, Loader, detect_gpus
from librarian.probe.target import Target, TargetFacts, probe_target
from librarian.probe.torch import _torch_parts, detect_torch

log = logging.getLogger(__name__)
T = TypeVar("T")

# --- everything -------------------------------------------------------------------------------------------


def _safely(what: str, detect: Callable[[], Probed[T]]) -> Probed[T]:
    try:
        return detect()
    except Exception as e:  # a probe must degrade to "unknown", never stop the report
        log.debug("probing %s failed", what, exc_info=True)
        return Probed.unknown(f"probing {what} failed: {e}")


def _torch_safely(path: list[str] | None) -> tuple[Probed[TorchInfo], Probed[MajorMinor]]:
    try:
        return _torch_parts(path)
    except Exception as e:  # noqa: BLE001 - see _safely
        return Probed.unknown(f"cannot read torch ({e}); pass --torch"), Probed.unknown("pass --cuda")


def detect_machine(
    *, loader: Loader = ctypes.CDLL, torch_path: list[str] | None = None, target: Target | None = None
) -> Machine:
    """This machine, as the ``target`` interpreter sees it (default: this one); never raises but for a bad target.

    GPUs and the driver are the machine's; tags, Python version, torch and its CUDA line are the target's,
    read by one probe run of it (:func:`librarian.probe.target.probe_target`) unless it is this interpreter.
    """
    try:
        gpus, driver = detect_gpus(loader, os.environ.get("CUDA_VISIBLE_DEVICES"))
    except Exception as e:  # noqa: BLE001 - see _safely
        gpus, driver = Probed.unknown(f"{NO_GPU} ({e})"), Probed.unknown(NO_DRIVER)
    # The machine's own parts, whichever interpreter looks at it.
    hardware = Machine(
        gpus=gpus,
        selected=gpus.value[0].index if gpus.value else 0,
        driver_cuda=driver,
        glibcxx=_safely("libstdc++", detect_glibcxx),
    )
    if target is not None and not target.own:
        return _target_machine(hardware, target, probe_target(target))
    torch, cuda = _torch_safely(torch_path)
    return replace(
        hardware,
        torch=torch,
        cuda=cuda,
        python_tags=_safely("interpreter tags", lambda: Probed.found(tuple(sys_tags()), "packaging.tags")),
        python=Probed.found(tuple(sys.version_info[:3]), "sys.version_info"),
        interpreter=Probed.found(sys.executable, target.how if target else "librarian's own interpreter"),
        search_path=Probed.found(tuple(sys.path), "sys.path"),
        glibc=_safely("glibc", detect_glibc),
        cpu=_safely("CPU", lambda: Probed.found(canonical_cpu(_machine()), "platform.machine()")),
        os=Probed.found(sys.platform, "sys.platform"),
    )


def _target_machine(hardware: Machine, target: Target, facts: TargetFacts) -> Machine:
    """The machine as another interpreter sees it, from its probe's answer."""
    where = str(target.executable)
    torch, cuda = _torch_safely(list(facts.path))
    glibc = (
        Probed.found(facts.glibc, f"{where}: os.confstr") if facts.glibc else _safely("glibc", detect_glibc)
    )
    if facts.tags is not None:
        tags: Probed[tuple[Tag, ...]] = Probed.found(facts.tags, f"{where}: packaging.tags")
    elif facts.implementation == "cpython" and facts.platform == "linux" and glibc.value is not None:
        # Neither packaging nor pip there: the tags its version, glibc and CPU give, as packaging would list them.
        platforms = linux_platforms(glibc.value, canonical_cpu(facts.machine))
        tags = Probed.found(
            interpreter_tags(facts.version[:2], platforms), f"{where}: computed (no packaging there)"
        )
    else:
        tags = Probed.unknown(
            f"{where} has neither packaging nor pip to list its tags; pass --python X.Y --platform"
        )
    return replace(
        hardware,
        torch=torch,
        cuda=cuda,
        python_tags=tags,
        python=Probed.found(facts.version, f"{where}: sys.version_info"),
        interpreter=Probed.found(facts.executable, target.how),
        search_path=Probed.found(facts.path, f"{where}: sys.path"),
        glibc=glibc,
        cpu=Probed.found(canonical_cpu(facts.machine), f"{where}: platform.machine()"),
        os=Probed.found(facts.platform, f"{where}: sys.platform"),
    )


def detect_target_torch(target: Target) -> TorchInfo | None:
    """The torch installed for ``target`` (read from its files, never imported); ``None`` if absent."""
    return detect_torch(None if target.own else list(probe_target(target).path))


def _machine() -> str:
    """``platform.machine()``, without importing :mod:`platform` where ``os.uname`` says it (its start-up)."""
    if hasattr(os, "uname"):
        return os.uname().machine
    import platform  # Windows

    return platform.machine()
