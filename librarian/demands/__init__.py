"""The seven demands a compiled wheel makes of a machine, and the one judgement over them.

Each demand module has the same small shape: ``needs(wheel) -> Need`` (read from the bytes' facts, or from
the filename where no bytes were read) and ``check(need, machine) -> Verdict``. :func:`judge` decides which
members load and runs every demand over them; :func:`claims` compares what a wheel says with its bytes.
Everything outside this package (inspect, doctor, publish, pull, verify, retag) goes through the names
below and nothing else: ``tests/test_code_health.py`` holds ``ops/`` to that.
"""

from __future__ import annotations

from librarian.demands.base import OTHER_CUDA_LINE, Cause, Demand, Said, Verdict, Wheel, some
from librarian.demands.claims import Claim, ClaimKind, claims, said_claims
from librarian.demands.gpu import GpuMatch, Serving, no_cell_words
from librarian.demands.judgement import (
    CellFit,
    Judgement,
    Runs,
    bound_to_its_torch_line,
    cells,
    judge,
    judge_cell,
    serves_line,
    torch_binding,
)
from librarian.demands.os import no_cuda
from librarian.demands.properties import Properties, properties
from librarian.demands.table import DEMANDS, Claimed, Row, Sees, demand_of, demands
from librarian.demands.torch import Binding

__all__ = [
    "DEMANDS",
    "OTHER_CUDA_LINE",
    "Binding",
    "Cause",
    "CellFit",
    "Claim",
    "ClaimKind",
    "Claimed",
    "Demand",
    "GpuMatch",
    "Judgement",
    "Properties",
    "Row",
    "Runs",
    "Said",
    "Sees",
    "Serving",
    "Verdict",
    "Wheel",
    "bound_to_its_torch_line",
    "cells",
    "claims",
    "demand_of",
    "demands",
    "judge",
    "judge_cell",
    "no_cell_words",
    "no_cuda",
    "properties",
    "said_claims",
    "serves_line",
    "some",
    "torch_binding",
]
