"""The pre-softmax projection (section 3.4) and the label-smoothed loss (5.4) together, by chunks of
target tokens, so that the (tokens, V) logits are never written whole.

At the paper's ~25,000 target tokens a step and a 37,000-piece vocabulary the logits are 1.9 GB in
bf16 (3.7 GB in float32), written by the output product, read and written again by the loss and its
gradient: on an H200 the loss's kernels, copies and casts took a third of a compiled step
(BENCHMARKS.md, "GPU: NVIDIA H200"). Here each chunk of `chunk` tokens makes its logits, its
softmax and at once its gradients, dL/dh = (p - q) W and dL/dW += (p - q)^T h (p the softmax, q the
smoothed target of `aiayn.train.loss`), and drops the logits; the backward pass only scales what the
forward pass stored (the same idea as Liger Kernel's fused linear cross entropy, written here in
PyTorch operations). The nll sum it returns is for logging: it carries no gradient.

    loss, nll = chunked_output_nll(h, model.output_weight, model.output_bias, target, 0.1, pad_id)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

CHUNK = 4096  # target tokens per chunk: 4,096 x 37,000 float32 logits are 0.6 GB


class _ChunkedOutputNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, target, epsilon: float, ignore_index: int, chunk: int):
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        # the gradients' products in autocast's precision (bf16) where it is on, cast once a chunk
        device = h.device.type
        low = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
        grad_h = torch.empty_like(h) if need_h else None  # (tokens, d)
        sums = torch.promote_types(weight.dtype, torch.float32)  # bf16 products summed in float32
        grad_w = torch.zeros(weight.shape, dtype=sums, device=weight.device) if need_w else None
        grad_b = torch.zeros(bias.shape, dtype=sums, device=bias.device) if need_b else None
        loss = torch.zeros((), dtype=torch.float32, device=h.device)
        nll = torch.zeros((), dtype=torch.float32, device=h.device)
        vocab, w_low = weight.size(0), weight.to(low) if need_h else None
        for start in range(0, h.size(0), chunk):
            hc, tc = h[start : start + chunk], target[start : start + chunk]  # (c, d), (c,)
            real = (tc != ignore_index).float()  # (c,)
            safe = tc.masked_fill(tc == ignore_index, 0)[:, None]  # (c, 1)
            log_probs = torch.log_softmax(F.linear(hc, weight, bias).float(), dim=-1)  # (c, V)
            picked = -log_probs.gather(-1, safe).squeeze(-1)  # (c,) -log p(reference)
            nll += (picked * real).sum()
            loss += (((1.0 - epsilon) * picked - epsilon / vocab * log_probs.sum(-1)) * real).sum()
            if not (need_h or need_w or need_b):
                continue
            grad = log_probs.exp_().sub_(epsilon / vocab)  # (c, V): p - eps/V, in place
            grad.scatter_add_(-1, safe, torch.full_like(safe, -(1.0 - epsilon), dtype=grad.dtype))
            grad.mul_(real[:, None])  # padding gives nothing
            lowered = grad.to(low)
            if need_h:
                grad_h[start : start + chunk] = lowered @ w_low
            if need_w:
                grad_w += (lowered.t() @ hc.to(low)).to(sums)
            if need_b:
                grad_b += grad.sum(0)
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        grads = [None if g is None else g * grad_loss.to(g.dtype) for g in ctx.saved_tensors]
        return *grads, None, None, None, None


def chunked_output_nll(
    h: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    target: Tensor,
    epsilon: float,
    ignore_index: int,
    chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:
    """h (..., d) the decoder's output, weight (V, d) and bias (V,) the output layer's, target (...)
    -> (smoothed loss summed over real tokens, nll sum), float32, as `label_smoothed_nll` of
    `F.linear(h, weight, bias)` gives them; only the loss has a gradient."""
    flat = h.reshape(-1, h.size(-1))  # (tokens, d)
    return _ChunkedOutputNLL.apply(flat, weight, bias, target.reshape(-1), epsilon, ignore_index, chunk)
