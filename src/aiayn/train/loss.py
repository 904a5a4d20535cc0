"""Label-smoothed cross entropy (section 5.4, "Label Smoothing", epsilon_ls = 0.1).

The smoothed target puts 1 - epsilon on the reference token and spreads epsilon uniformly over
**all V classes** (the reference included), so the reference gets 1 - epsilon + epsilon / V and
every other token epsilon / V. This is what `torch.nn.functional.cross_entropy(label_smoothing=)`
and tensor2tensor do (fairseq spreads over the V - 1 other classes instead). Per target token:

    loss = (1 - epsilon) * nll + epsilon / V * sum_v -log p(v)
    nll  = -log p(reference)

One autograd Function computes both from a single log-softmax and writes a single (tokens, V)
gradient, softmax - smoothed target, in its backward pass: less time and memory than letting
autograd differentiate the formula term by term. The gradient is written over the saved
log-probabilities (a fresh (tokens, V) tensor is tens of megabytes whose pages the CPU must fault
in again every step), so the backward pass runs once: `retain_graph` cannot replay it. Padding
positions (`ignore_index`) contribute nothing.

Under `torch.compile` the same loss is written as plain tensor operations (`smoothed_nll_terms`),
which the compiler fuses: on a GPU one pass reads the bf16 logits in the forward pass and one
writes their gradient, where the Function above makes a float32 copy and passes over it five times.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class _SmoothedNLL(torch.autograd.Function):
    """The loss above with its gradient written out: d loss / d logits = softmax - q, where q is
    the smoothed target (1 - epsilon on the reference, epsilon / V everywhere)."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, epsilon: float, ignore_index: int, overwrite: bool):
        real = target != ignore_index  # (tokens,)
        safe = target.masked_fill(~real, 0)
        # The caller gave the logits up: no fresh (tokens, V) tensor. An alias without autograd
        # history (`detach`), so no view of another Function's output is seen modified in place.
        out = logits.detach() if overwrite else None
        log_probs = torch.log_softmax(logits, dim=-1, out=out)  # (tokens, V)
        nll = -log_probs.gather(-1, safe[:, None]).squeeze(-1).masked_fill(~real, 0.0)  # (tokens,)
        loss = (1.0 - epsilon) * nll
        if epsilon:
            uniform = (-log_probs.sum(dim=-1)).masked_fill(~real, 0.0)  # (tokens,) sum_v -log p(v)
            loss = loss + (epsilon / logits.size(-1)) * uniform
        ctx.save_for_backward(log_probs, safe, real)
        ctx.epsilon, ctx.consumed = epsilon, False
        return loss.sum(), nll.sum()

    @staticmethod
    def backward(ctx, grad_loss: Tensor, grad_nll: Tensor):
        if ctx.consumed:
            raise RuntimeError("label_smoothed_nll: its backward runs once (it reuses its buffer)")
        ctx.consumed = True
        log_probs, safe, real = ctx.saved_tensors
        eps, vocab = ctx.epsilon, log_probs.size(-1)
        realf = real.to(log_probs.dtype)  # (tokens,)
        grad = log_probs.exp_()  # (tokens, V) softmax, in the saved buffer: no fresh pages to fault in
        grad.mul_(((grad_loss + grad_nll) * realf)[:, None])
        if eps:
            grad.sub_((grad_loss * eps / vocab * realf)[:, None])
        reference = -((grad_loss * (1.0 - eps) + grad_nll) * realf)[:, None]  # (tokens, 1)
        grad.scatter_add_(-1, safe[:, None], reference)
        return grad, None, None, None, None


def smoothed_nll_terms(
    logits: Tensor, target: Tensor, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """The loss of `_SmoothedNLL` in plain operations, differentiated by autograd: logits
    (tokens, V), target (tokens,) -> (smoothed loss sum, nll sum). What `torch.compile` fuses."""
    real = target != ignore_index  # (tokens,)
    wide = torch.promote_types(logits.dtype, torch.float32)  # bf16 and fp16 logits summed in fp32
    log_probs = torch.log_softmax(logits.to(wide), dim=-1)  # (tokens, V)
    nll = -log_probs.gather(-1, target.masked_fill(~real, 0)[:, None]).squeeze(-1)  # (tokens,)
    uniform = -log_probs.sum(dim=-1)  # (tokens,) sum_v -log p(v)
    loss = (1.0 - epsilon) * nll + (epsilon / logits.size(-1)) * uniform
    zero = torch.zeros_like(nll)
    return torch.where(real, loss, zero).sum(), torch.where(real, nll, zero).sum()


def label_smoothed_nll(
    logits: Tensor, target: Tensor, epsilon: float, ignore_index: int, overwrite_logits: bool = False
) -> tuple[Tensor, Tensor]:
    """logits (..., V), target (...) -> (smoothed loss summed over real tokens, nll summed), fp32.

    Sums, not means: the trainer divides by the number of target tokens of a whole update
    (across gradient accumulation and ranks), so every token weighs the same.
    `overwrite_logits`: the log-probabilities are written over the logits, which the caller must
    not read again and no other backward may need (the model's output layer does not keep them):
    the trainers' case, a third faster on the CPU than filling a fresh tensor. Traced by
    `torch.compile`, it is `smoothed_nll_terms`, which the compiler fuses.
    """
    if torch.compiler.is_compiling():
        flat = logits.reshape(-1, logits.size(-1))  # (tokens, V)
        return smoothed_nll_terms(flat, target.reshape(-1), epsilon, ignore_index)
    logits = logits.reshape(-1, logits.size(-1)).float()  # (tokens, V)
    return _SmoothedNLL.apply(logits, target.reshape(-1), epsilon, ignore_index, overwrite_logits)


class LabelSmoothedCrossEntropy(nn.Module):
    """`label_smoothed_nll` as a module: forward(logits, target) -> (loss_sum, nll_sum)."""

    def __init__(self, epsilon: float = 0.1, ignore_index: int = 0):
        super().__init__()
        self.epsilon = epsilon
        self.ignore_index = ignore_index

    def forward(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        return label_smoothed_nll(logits, target, self.epsilon, self.ignore_index)
