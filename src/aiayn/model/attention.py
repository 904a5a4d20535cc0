"""Attention (section 3.2): scaled dot-product attention (Eq. 1) and multi-head attention (3.2.2),
full or restricted to a window (Table 1, `aiayn.model.window`), with the key/value caches of
`aiayn.model.cache` that make incremental decoding cost one position per step.

Masks follow PyTorch's convention: a boolean tensor broadcastable to (batch, heads, q_len, k_len)
where True means "may attend".
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from aiayn.model.cache import KVCache
from aiayn.model.window import band_mask, window_attention

# The fused kernels PyTorch may pick on a GPU, cuDNN's left out: it builds an execution plan for every
# new shape, 0.13 s each on an H100 (torch 2.11, measured: BENCHMARKS.md, "GPU"), and token-bucketed
# batches and a growing decoder cache bring new shapes all the time. Flash and memory-efficient
# attention take any shape at once.
GPU_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_backends(device: torch.device) -> contextlib.AbstractContextManager:
    """The context in which PyTorch's fused attention on `device` leaves out cuDNN's (GPUs only).

    Under torch.compile it is `sdpa_kernel(GPU_ATTENTION)`, which the compiler traces; run eagerly,
    a context that switches off cuDNN's attention alone (2.6 us a call on the CPU side, against
    30 us for `sdpa_kernel`, which a decoding step would pay once per layer).
    """
    if device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel(GPU_ATTENTION) if torch.compiler.is_compiling() else _without_cudnn()


@contextlib.contextmanager
def _without_cudnn():
    was = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def causal_mask(q_len: int, k_len: int, device: torch.device | None = None) -> Tensor:
    """(q_len, k_len) bool, True where query i may see key j: j <= i + (k_len - q_len)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Eq. 1: softmax(Q K^T / sqrt(d_k)) V.

    q: (batch, heads, q_len, d_k); k: (batch, heads, k_len, d_k); v: (batch, heads, k_len, d_v);
    mask: bool, broadcastable to (batch, heads, q_len, k_len). Without `need_weights` this is
    PyTorch's fused kernel (on a GPU flash or memory-efficient attention: GPU_ATTENTION); with it,
    the explicit computation, which also returns the weights (batch, heads, q_len, k_len).
    """
    if not need_weights:
        with attention_backends(q.device):
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
            )
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (batch, heads, q_len, k_len)
    if is_causal:
        causal = causal_mask(q.size(-2), k.size(-2), q.device)
        mask = causal if mask is None else mask & causal
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = F.dropout(weights, dropout_p) @ v if dropout_p > 0 else weights @ v  # (batch, heads, q_len, d_v)
    return out, weights


class MultiHeadAttention(nn.Module):
    """3.2.2: h heads of Eq. 1 on learned projections, concatenated and projected.

    Each head sees queries and keys of size d_k and values of size d_v, by default both
    d_model / h (the paper's choice, which keeps the cost of h heads that of one full-size head);
    Table 3 row (B) shrinks d_k alone. Self-attention projects Q, K and V with one fused matmul;
    encoder-decoder attention projects Q from the decoder and K, V (fused) from the encoder output,
    once per sentence when decoding. Self-attention with a `window` r sees only the keys within r
    positions (`aiayn.model.window`; causal: the r before and itself); cross-attention is full.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        cross: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
        window: int | None = None,
    ):
        super().__init__()
        if (d_k is None or d_v is None) and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.cross, self.dropout = n_heads, cross, dropout
        self.window = None if cross else window
        self.d_k, self.d_v = d_k or d_model // n_heads, d_v or d_model // n_heads
        qk, v = n_heads * self.d_k, n_heads * self.d_v
        if cross:
            self.q_proj = nn.Linear(d_model, qk)
            self.kv_proj = nn.Linear(d_model, qk + v)
        else:
            self.qkv_proj = nn.Linear(d_model, 2 * qk + v)
        self.out_proj = nn.Linear(v, d_model)

    def projections(self) -> list[tuple[nn.Linear, list[int]]]:
        """Each input projection with the output sizes of the matrices it fuses ([q; k; v] rows)."""
        qk, v = self.n_heads * self.d_k, self.n_heads * self.d_v
        if self.cross:
            return [(self.q_proj, [qk]), (self.kv_proj, [qk, v])]
        return [(self.qkv_proj, [qk, qk, v])]

    def _split(self, x: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, ...]:
        """(batch, len, heads * sum(dims)) -> one view per dim, each (batch, heads, len, dim).

        With equal sizes the `parts` axis is unbound in place (not after a permute), so the
        backward pass writes the gradients straight into one (batch, len, parts * d_model)
        tensor: one copy, not two. Unequal sizes (d_k != d_v) are cut along the last axis.
        """
        b, t, _ = x.shape
        if len(set(dims)) == 1:
            parts = x.view(b, t, len(dims), self.n_heads, dims[0]).unbind(2)
        else:
            pieces = x.split([self.n_heads * d for d in dims], dim=-1)
            parts = tuple(p.view(b, t, self.n_heads, d) for p, d in zip(pieces, dims, strict=True))
        return tuple(p.transpose(1, 2) for p in parts)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder output (batch, src_len, d_model) -> K (batch, heads, src_len, d_k), V (..., d_v)."""
        k, v = self._split(self.kv_proj(memory), (self.d_k, self.d_v))
        return k, v

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        memory_kv: tuple[Tensor, Tensor] | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """x: (batch, q_len, d_model) -> (batch, q_len, d_model), and the weights if asked.

        Self-attention: `cache` (decoding) appends this step's K, V and attends to all of them
        (a `WindowCache` holds only the window's). Cross-attention: K, V come from `memory_kv`
        (precomputed) or are projected from `memory`. `mask` is (batch, 1, 1, k_len) in windowed
        self-attention: which keys are real.
        """
        if self.cross:
            if memory_kv is not None:
                return self._cached_cross(self.q_proj(x), *memory_kv, mask, need_weights)
            q = self._split(self.q_proj(x), (self.d_k,))[0]  # (batch, heads, q_len, d_k)
            k, v = self.project_kv(memory)
        else:
            q, k, v = self._split(self.qkv_proj(x), (self.d_k, self.d_k, self.d_v))
            if cache is not None:
                k, v = cache.append(k, v)
        dropout = self.dropout if self.training else 0.0
        if self.window is not None and cache is None:
            out, weights = self._windowed(q, k, v, mask, is_causal, dropout, need_weights)
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask, is_causal, dropout, need_weights)
        b, _, t, _ = out.shape
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.d_v)  # (batch, q_len, heads * d_v)
        return self.out_proj(out), weights

    def _windowed(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        causal: bool,
        dropout: float,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """Self-attention within the window, q, k (batch, heads, n, d_k), v (..., d_v): by blocks,
        O(window * n); as Eq. 1 with the dense band mask where the band covers everything anyway
        (n <= window + 1) or the n x n weights are asked for (attention maps). Either way a query
        none of whose band is a real key gets a finite, meaningless output."""
        n = q.size(2)
        if n > self.window + 1 and not need_weights:
            return window_attention(q, k, v, self.window, causal, mask, dropout), None
        band = band_mask(n, self.window, causal, q.device)  # (n, n)
        if mask is not None:  # (batch, 1, n, n); a padded query with no real key in reach sees its band
            seen = mask & band
            band = seen | (band & ~seen.any(dim=-1, keepdim=True))
        return scaled_dot_product_attention(q, k, v, band, False, dropout, need_weights)

    def cached_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """What decoding keeps of the encoder output (n, src_len, d_model) for `forward`'s
        `memory_kv`: keys transposed K^T (n, heads, d_k, src_len) and values (n, heads, src_len, d_v),
        both contiguous, so no step copies them again."""
        k, v = self.project_kv(memory)
        return k.transpose(-2, -1).contiguous(), v.contiguous()

    def _cached_cross(
        self, q: Tensor, k_t: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Encoder-decoder attention while decoding `beam` hypotheses per sentence.

        q (n * beam, q_len, heads * d_k), the projected queries, sentence-major; k_t, v (`cached_kv`)
        and mask (n, 1, 1, src_len), once per sentence. The beams of a sentence are its queries: one
        product per sentence reads its keys once, not once per hypothesis (the CPU's memory traffic).
        """
        n, (rows, t, _), h = k_t.size(0), q.shape, self.n_heads
        beam = rows // n
        q = q.view(n, beam, t, h, self.d_k).permute(0, 3, 1, 2, 4).reshape(n, h, beam * t, self.d_k)
        scores = q @ k_t / math.sqrt(self.d_k)  # (n, heads, beam * q_len, src_len)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = (weights @ v).view(n, h, beam, t, self.d_v).permute(0, 2, 3, 1, 4)  # (n, beam, t, h, d_v)
        out = self.out_proj(out.reshape(rows, t, h * self.d_v))  # (rows, q_len, d_model)
        if need_weights:
            weights = weights.view(n, h, beam, t, -1).transpose(1, 2).reshape(rows, h, t, -1)
        return out, weights if need_weights else None
