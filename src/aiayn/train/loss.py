"""Label-smoothed cross entropy (section 5.4, "Label Smoothing", epsilon_ls = 0.1).

The smoothed target puts 1 - epsilon on the reference token and spreads epsilon uniformly over
**all V classes** (the reference included), so the reference gets 1 - epsilon + epsilon / V and
every other token epsilon / V. This is what `torch.nn.functional.cross_entropy(label_smoothing=)`
and tensor2tensor do (fairseq spreads over the V - 1 other classes instead). Per target token:

    loss = (1 - epsilon) * nll + epsilon / V * sum_v -log p(v)
    nll  = -log p(reference)

Both are computed from logsumexp, so no (tokens, V) log-probability tensor is written in the
forward pass. Padding positions (`ignore_index`) contribute nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def label_smoothed_nll(
    logits: Tensor, target: Tensor, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """logits (..., V), target (...) -> (smoothed loss summed over real tokens, nll summed), fp32.

    Sums, not means: the trainer divides by the number of target tokens of a whole update
    (across gradient accumulation and ranks), so every token weighs the same.
    """
    logits = logits.reshape(-1, logits.size(-1)).float()  # (tokens, V)
    target = target.reshape(-1)  # (tokens,)
    real = target != ignore_index  # (tokens,)
    lse = torch.logsumexp(logits, dim=-1)  # (tokens,)
    safe_target = target.masked_fill(~real, 0)
    nll = lse - logits.gather(-1, safe_target.unsqueeze(-1)).squeeze(-1)  # (tokens,) -log p(ref)
    nll = nll.masked_fill(~real, 0.0)
    if epsilon == 0.0:
        return nll.sum(), nll.sum()
    vocab = logits.size(-1)
    uniform = vocab * lse - logits.sum(dim=-1)  # (tokens,) sum_v -log p(v)
    uniform = uniform.masked_fill(~real, 0.0)
    loss = (1.0 - epsilon) * nll + (epsilon / vocab) * uniform
    return loss.sum(), nll.sum()


class LabelSmoothedCrossEntropy(nn.Module):
    """`label_smoothed_nll` as a module: forward(logits, target) -> (loss_sum, nll_sum)."""

    def __init__(self, epsilon: float = 0.1, ignore_index: int = 0):
        super().__init__()
        self.epsilon = epsilon
        self.ignore_index = ignore_index

    def forward(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        return label_smoothed_nll(logits, target, self.epsilon, self.ignore_index)
