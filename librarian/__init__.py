"""librarian: a cache of compiled CUDA / PyTorch extension wheels, as a command and as a library.

The public API is what ``__all__`` names; each name is imported on first use (PEP 562), so that
``import librarian`` stays as cheap as ``librarian --version``::

    import librarian
    facts = librarian.inspect_wheel(Path("flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"))
    machine = librarian.detect_machine().with_overrides(sm="90", torch="2.9", cuda="12.8")
    judgement = librarian.judge(librarian.Wheel(librarian.WheelName.parse(facts.filename), facts), machine)
    print(judgement.runs.value, judgement.serving)
    for verdict in judgement.verdicts:
        print(verdict.demand.title, verdict.ok, verdict.reason)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it
_API = {
    # values
    "WheelName": "librarian.coords", "Label": "librarian.coords", "GpuArch": "librarian.coords",
    "Cell": "librarian.coords", "WheelFacts": "librarian.facts", "BinaryFacts": "librarian.facts",
    "Machine": "librarian.machine", "KnownGpu": "librarian.gpus", "known_gpus": "librarian.gpus",
    # reading wheels and machines, judging
    "inspect_wheel": "librarian.wheel", "retag": "librarian.wheel",
    "detect_machine": "librarian.probe", "find_target": "librarian.probe.target",
    "Wheel": "librarian.demands", "Verdict": "librarian.demands", "Demand": "librarian.demands",
    "judge": "librarian.demands", "claims": "librarian.demands", "Judgement": "librarian.demands",
    "cells": "librarian.demands", "Runs": "librarian.demands",
    # stores and what is done to them
    "open_store": "librarian.stores", "load_layout": "librarian.config",
    "publish": "librarian.ops.store.publish", "PublishOptions": "librarian.ops.store.publish",
    "pull": "librarian.ops.machine.pull", "Wants": "librarian.ops.resolve", "verify": "librarian.ops.store.verify",
    "gc": "librarian.ops.store.gc", "GcPolicy": "librarian.ops.store.gc",
    # errors
    "LibrarianError": "librarian.errors", "BadInput": "librarian.errors", "StoreError": "librarian.errors",
    "NotFound": "librarian.errors", "Refused": "librarian.errors", "Unreachable": "librarian.errors",
}  # fmt: skip

__all__ = [
    "BadInput",
    "BinaryFacts",
    "Cell",
    "Demand",
    "GcPolicy",
    "GpuArch",
    "Judgement",
    "KnownGpu",
    "Label",
    "LibrarianError",
    "Machine",
    "NotFound",
    "PublishOptions",
    "Refused",
    "Runs",
    "StoreError",
    "Unreachable",
    "Verdict",
    "Wants",
    "Wheel",
    "WheelFacts",
    "WheelName",
    "__version__",
    "cells",
    "claims",
    "detect_machine",
    "find_target",
    "gc",
    "inspect_wheel",
    "judge",
    "known_gpus",
    "load_layout",
    "open_store",
    "publish",
    "pull",
    "retag",
    "verify",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'librarian' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
