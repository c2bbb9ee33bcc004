"""torchkern: ``scale(x, factor)`` on the GPU, from a compiled torch extension."""

import torch  # noqa: F401  (loads libtorch before the extension that links it)

from torchkern._C import scale

__all__ = ["scale"]
