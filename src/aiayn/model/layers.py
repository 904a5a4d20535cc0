"""Encoder and decoder layers (section 3.1) and the position-wise feed-forward network (3.3).

Each sub-layer is wrapped as in 3.1 and 5.4: LayerNorm(x + Dropout(Sublayer(x))) (post-norm, the
paper's). The pre-norm option computes x + Dropout(Sublayer(LayerNorm(x))) and needs a final norm
after the stack (`ModelConfig.final_norm`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.cache import KVCache
from aiayn.model.dropout import dropout

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class LayerSettings(Protocol):
    """What a stack of 3.1 layers reads from its config: `ModelConfig` has it all, and so has the
    Vision Transformer's config (`aiayn.vision.model.VisionConfig`), which has no vocabulary."""

    d_model: int
    d_ff: int
    n_heads: int
    key_dim: int  # d_k of 3.2.2
    value_dim: int  # d_v
    n_layers: int  # N: the encoder's (the decoder reads ModelConfig.decoder_layers)
    dropout: float  # P_drop (5.4)
    attention_dropout: float
    activation_dropout: float
    activation: str  # a key of ACTIVATIONS
    norm_first: bool
    use_final_norm: bool
    layer_norm_eps: float
    attention_window: int | None  # r of Table 1's restricted self-attention; None: full attention


class FeedForward(nn.Module):
    """Eq. 2: FFN(x) = max(0, x W1 + b1) W2 + b2, with ReLU replaceable by GELU or swish."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        h = self.activation(self.linear1(x))  # (batch, len, d_ff)
        if self.dropout:
            h = dropout(h, self.dropout, self.training)
        return self.linear2(h)


class _Residual(nn.Module):
    """One sub-layer connection of 3.1: residual, dropout (5.4) and layer normalisation."""

    def __init__(self, config: LayerSettings):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = config.dropout
        self.norm_first = config.norm_first

    def pre(self, x: Tensor) -> Tensor:
        """The sub-layer's input: normalised first in pre-norm."""
        return self.norm(x) if self.norm_first else x

    def post(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """x + Dropout(sublayer_out), normalised after in post-norm."""
        out = x + dropout(sublayer_out, self.dropout, self.training)
        return out if self.norm_first else self.norm(out)


def _attention(config: LayerSettings, cross: bool = False) -> MultiHeadAttention:
    c = config
    return MultiHeadAttention(
        c.d_model, c.n_heads, c.attention_dropout, cross, c.key_dim, c.value_dim, c.attention_window
    )


class EncoderLayer(nn.Module):
    """3.1 encoder layer: multi-head self-attention, then the feed-forward network."""

    def __init__(self, config: LayerSettings):
        super().__init__()
        self.self_attn = _attention(config)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.activation, config.activation_dropout)
        self.attn_res, self.ffn_res = _Residual(config), _Residual(config)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (batch, src_len, d_model); mask (batch, 1, 1, src_len) True at real tokens."""
        h, weights = self.self_attn(self.attn_res.pre(x), mask=mask, need_weights=need_weights)
        x = self.attn_res.post(x, h)
        x = self.ffn_res.post(x, self.ffn(self.ffn_res.pre(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """3.1 decoder layer: masked self-attention, encoder-decoder attention, feed-forward."""

    def __init__(self, config: LayerSettings):
        super().__init__()
        self.self_attn, self.cross_attn = _attention(config), _attention(config, cross=True)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.activation, config.activation_dropout)
        self.self_res, self.cross_res, self.ffn_res = _Residual(config), _Residual(config), _Residual(config)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        memory_kv: tuple[Tensor, Tensor] | None = None,
        need_weights: bool = False,
        self_mask: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """x (batch, tgt_len, d_model); memory (batch, src_len, d_model).

        Without a cache the self-attention is causal over x (3.2.3: no position sees a later one),
        and with an attention window sees only the window's earlier positions; with a cache, x holds
        only the new positions and attends to the cached ones `self_mask` (batch, 1, tgt_len, keys)
        allows (None: every one; a window cache keeps only the window's).
        Returns x and, if asked, (self-attention weights, cross-attention weights).
        """
        causal = cache is None and x.size(1) > 1
        h, self_w = self.self_attn(
            self.self_res.pre(x), mask=self_mask, is_causal=causal, cache=cache, need_weights=need_weights
        )
        x = self.self_res.post(x, h)
        h, cross_w = self.cross_attn(
            self.cross_res.pre(x), memory, memory_mask, memory_kv=memory_kv, need_weights=need_weights
        )
        x = self.cross_res.post(x, h)
        x = self.ffn_res.post(x, self.ffn(self.ffn_res.pre(x)))
        return x, ((self_w, cross_w) if need_weights else None)
