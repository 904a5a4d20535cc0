"""A search step's scores (section 6.1) from the logits, without writing the log-probabilities.

Beam search needs, of each step's (rows, vocab) logits, the 2k best continuations of each
sentence ranked by log P(prefix) + log softmax(logits). PyTorch computes them as log_softmax (a
pass that writes the whole tensor, with an exp accurate to the last bit), an add of the prefixes'
log P (another) and a top-k (a third): about 2 ms a step for 256 rows of 8,000 on a 2-core Zen 3,
a tenth of the student's step. The native library (aiayn.runtime.native_build) computes the same
in two reading passes: `log_normalizers` (log sum exp of each row: online maximum, exp by a
polynomial within 1 ulp) and `beam_top` (the c best of logits + offset over a sentence's rows,
skipping blocks whose maximum cannot enter), together ~1 ms. Without the library, or off the CPU,
both are PyTorch's (`torch.logsumexp`, add and `row_topk`). Results equal PyTorch's up to float32
rounding (the order of the sum, exp within 1 ulp): tests/runtime/test_scores.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.runtime import native_build
from aiayn.runtime.blockwise import row_topk


def _native(*tensors: Tensor) -> bool:
    """Whether the native kernels take these tensors: float32 on the CPU, the library loaded."""
    if not all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors):
        return False
    return not torch.is_grad_enabled() and native_build.load()


def log_normalizers(logits: Tensor) -> Tensor:
    """logits (rows, vocab) -> (rows,) log sum exp of each row: log softmax = logits - this."""
    if _native(logits):
        return torch.ops.aiayn.row_log_normalizers(logits.contiguous())
    return torch.logsumexp(logits, dim=-1)


def beam_top(scores: Tensor, offsets: Tensor, c: int) -> tuple[Tensor, Tensor]:
    """scores (n, k, vocab), offsets (n, k) -> the c largest scores[i, j, v] + offsets[i, j] of each
    sentence i (n, c), sorted, and their indices j * vocab + v (n, c): `topk` of the sum over the
    sentence's k * vocab candidates (among equal ones any; -inf ones in any order). `scores` may be
    written over."""
    n, k, vocab = scores.shape
    if _native(scores, offsets):
        return torch.ops.aiayn.beam_top(scores.contiguous(), offsets.contiguous(), c)
    return row_topk(scores.add_(offsets[:, :, None]).reshape(n, k * vocab), c)
