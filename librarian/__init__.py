"""librarian: a cache of compiled CUDA / PyTorch extension wheels."""

from __future__ import annotations

__version__ = "0.1.0"
