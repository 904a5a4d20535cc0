"""Where a Vision Transformer looks: class-token attention and attention rollout over the patches.

Class-token attention is one layer's row of the class token (query 0) over the patch keys,
averaged over heads. Attention rollout (Abnar and Zuidema, 2020, "Quantifying Attention Flow in
Transformers") follows information through the residual stream: each layer's head-averaged
weights A become 0.5 A + 0.5 I (the residual connection of 3.1), rows renormalised, and the
layers' matrices are multiplied from the first to the last; the class token's row of the product
says how much each patch fed it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.errors import AiaynError


def class_token_attention(weights: list[Tensor], layer: int = -1) -> Tensor:
    """weights: per layer (batch, heads, 1 + n, 1 + n) -> (batch, n): the class token's
    head-averaged attention over the n patches in `layer` (rows sum to at most 1)."""
    if not -len(weights) <= layer < len(weights):
        shown = layer + 1 if layer >= 0 else len(weights) + layer + 1
        raise AiaynError(f"--layer {shown} is out of range: the model has {len(weights)} layers")
    return weights[layer].mean(dim=1)[:, 0, 1:]


def attention_rollout(weights: list[Tensor], residual: float = 0.5) -> Tensor:
    """weights: per layer (batch, heads, 1 + n, 1 + n) -> (batch, n): the class token's row of
    the rolled-out attention over the n patches."""
    tokens = weights[0].size(-1)
    identity = torch.eye(tokens, dtype=torch.float64, device=weights[0].device)
    flow = identity.expand(weights[0].size(0), tokens, tokens)  # (batch, 1 + n, 1 + n)
    for w in weights:
        a = (1 - residual) * w.double().mean(dim=1) + residual * identity  # (batch, 1 + n, 1 + n)
        a = a / a.sum(dim=-1, keepdim=True)
        flow = a @ flow  # later layers apply after earlier ones
    return flow[:, 0, 1:].to(weights[0].dtype)


def patch_map(scores: Tensor, grid: int, image_size: int) -> Tensor:
    """scores (batch, grid * grid) -> (batch, image_size, image_size): each patch's score over its
    pixels, scaled so each map's maximum is 1."""
    maps = scores.reshape(-1, 1, grid, grid)
    maps = torch.nn.functional.interpolate(maps, size=(image_size, image_size), mode="nearest")[:, 0]
    return maps / maps.amax(dim=(1, 2), keepdim=True).clamp_min(1e-12)
