"""A loopback Hugging Face Hub for tests: real HTTP, real ``huggingface_hub`` client, injectable faults.

Start one with ``LoopHub(root).start()`` (or the ``loophub`` pytest fixture in ``fixtures.py``), or by
hand with ``python -m tests.loophub --port 8765 --root DIR``.
"""

from __future__ import annotations

from .faults import Fault, FaultKind, Phase, Record, RequestLog
from .server import LoopHub

__all__ = ["Fault", "FaultKind", "LoopHub", "Phase", "Record", "RequestLog"]
