"""Dropout (section 5.4, Srivastava et al. 2014) with a cheaper random mask on the CPU.

`torch.nn.functional.dropout` draws one Bernoulli sample per element through the CPU generator
(mt19937), a call per element: on a 2-core CPU its 17 masks of a tiny-model training step cost
more than all its layer norms, softmaxes and the optimizer together (BENCHMARKS.md). Here one
64-bit draw gives four 16-bit lanes, and an element is kept when its lane's low 15 bits are at
least round(p * 2^15): the drop probability is p rounded to a multiple of 2^-15 (0.1 -> 0.100006)
and the kept elements are scaled by the exact 1 / (1 - that), so the expectation is unchanged.
(The lanes' low 15 bits: `random_()` fills an int64 with [0, 2^63), so the top bit is always 0.)
The draws come from the same global generator, so `torch.manual_seed` and the trainer's saved RNG
state make it reproducible. Off the CPU, under `torch.compile`, and for p within 2^-16 of 0 or 1,
it is PyTorch's own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

LANE_BITS = 15  # random bits used per element
_LANE_MASK = (1 << LANE_BITS) - 1


def lane_threshold(p: float) -> int:
    """round(p * 2^15): an element is kept when its lane's 15 bits are at least this."""
    return round(p * (1 << LANE_BITS))


def keep_mask(shape: torch.Size, p: float) -> tuple[Tensor, float]:
    """A bool CPU mask of `shape`, each element True with probability 1 - p' (p' = p rounded to a
    multiple of 2^-15, strictly between 0 and 1), and the scale 1 / (1 - p') of the kept ones."""
    threshold = lane_threshold(p)
    if not 0 < threshold < 1 << LANE_BITS:
        raise ValueError(f"dropout p={p} rounds to {threshold}/2^{LANE_BITS}: use F.dropout")
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_()  # 4 lanes each
    lanes = words.view(torch.int16)[:n].view(shape)
    keep = lanes.bitwise_and(_LANE_MASK) >= threshold
    return keep, 1.0 / (1.0 - threshold / (1 << LANE_BITS))


class _MaskedScale(torch.autograd.Function):
    """y = x * keep * scale; the backward pass reuses the bool mask (one byte per element)."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """F.dropout's contract: zero elements with probability p, scale the rest by 1 / (1 - p)."""
    if not training or p == 0.0:
        return x
    fast = x.device.type == "cpu" and x.is_floating_point() and not torch.compiler.is_compiling()
    if not fast or not 0 < lane_threshold(p) < 1 << LANE_BITS:  # p within 2^-16 of 0 or 1
        return F.dropout(x, p, training)
    keep, scale = keep_mask(x.shape, p)
    return _MaskedScale.apply(x, keep, scale)
