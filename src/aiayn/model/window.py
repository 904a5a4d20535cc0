"""Self-attention restricted to a neighbourhood of size r (Table 1's fourth row; section 7's plan for
"large inputs and outputs such as images, audio and video").

Each query attends to the keys within r positions of its own: in the encoder the positions
i - r ... i + r (2r + 1 keys), in the decoder's masked self-attention the position itself and the
r before it, i - r ... i (r + 1 keys). A layer then costs O(r * n * d) instead of O(n^2 * d), a
position reaches any other in O(n / r) layers (Table 1: "Self-Attention (restricted)"), and the
decoder needs to keep only its last r + 1 keys and values (`aiayn.model.cache.WindowCache`).

`window_attention` computes it by blocks, never as an n x n score matrix: the queries are cut into
blocks of `block_size` positions, and block b attends to the keys from r before its first position
to r after its last (r after none in the decoder), a window of block + 2r keys (block + r) that
`Tensor.unfold` cuts from the padded keys; a small mask inside that window keeps each query's band
of the keys and hides padding and positions past either end. Memory and time are
O(n * (block + 2r)) per head.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

MIN_BLOCK = 32  # queries per block at least: a block of r = 1 or 4 queries would be a tiny product each


def band_mask(n: int, window: int, causal: bool, device: torch.device | None = None) -> Tensor:
    """(n, n) bool, True where query i may see key j: |i - j| <= window, and j <= i if causal.

    The dense form of the band, for attention maps (which are n x n anyway) and short inputs.
    """
    offset = torch.arange(n, device=device)[None, :] - torch.arange(n, device=device)[:, None]  # j - i
    return (offset <= (0 if causal else window)) & (offset >= -window)


def block_size(window: int) -> int:
    """Queries per block: the window itself (each block then attends to 3r keys, 2r in the
    decoder), at least MIN_BLOCK."""
    return max(window, MIN_BLOCK)


def window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window: int,
    causal: bool,
    key_mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Eq. 1 with each query restricted to its band of keys (module docstring), by blocks.

    q, k: (batch, heads, n, d_k); v: (batch, heads, n, d_v); key_mask: (batch, 1, 1, n) bool, True
    at real keys, or None. -> (batch, heads, n, d_v). A query none of whose band is a real key
    (padding far from any real token) gets the mean of its band's values: finite, meaningless.
    """
    b, h, n, d_k = q.shape
    blk = min(block_size(window), n)
    blocks = -(-n // blk)
    tail = blocks * blk - n  # the last block's padding
    after = 0 if causal else window
    span = blk + window + after  # keys one block sees
    q = F.pad(q * (1.0 / math.sqrt(d_k)), (0, 0, 0, tail)).view(b, h, blocks, blk, d_k)
    k = F.pad(k, (0, 0, window, tail + after)).unfold(2, span, blk)  # (b, h, blocks, d_k, span)
    v = F.pad(v, (0, 0, window, tail + after)).unfold(2, span, blk)  # (b, h, blocks, d_v, span)
    scores = q @ k  # (b, h, blocks, blk, span)
    mask = _window_mask(n, window, causal, blk, blocks, key_mask, q.device)  # (b | 1, 1, blocks, blk, span)
    weights = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    out = weights @ v.transpose(-2, -1)  # (b, h, blocks, blk, d_v)
    return out.view(b, h, blocks * blk, -1)[:, :, :n]


def _window_mask(
    n: int,
    window: int,
    causal: bool,
    blk: int,
    blocks: int,
    key_mask: Tensor | None,
    device: torch.device,
) -> Tensor:
    """(batch | 1, 1, blocks, blk, span) bool: query p of a block may see key c of its window.

    Key c of block b's window is position b * blk - window + c; query p is b * blk + p: the band
    is 0 <= c - p <= 2 * window (window in the decoder), and the key must be a real position.
    """
    after = 0 if causal else window
    span = blk + window + after
    offset = torch.arange(span, device=device)[None, :] - torch.arange(blk, device=device)[:, None]
    band = (offset >= 0) & (offset <= window + after)  # (blk, span)
    real = torch.ones(1, n, dtype=torch.bool, device=device) if key_mask is None else key_mask[:, 0, 0]
    pad = blocks * blk - n + after
    real = F.pad(real, (window, pad), value=False).unfold(1, span, blk)  # (batch | 1, blocks, span)
    return band & real[:, None, :, None, :]
