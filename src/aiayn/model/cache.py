"""The decoder's self-attention caches (section 3.1, decoding one position at a time): the keys and
values of the positions decoded so far, so a step computes only its own.

`KVCache` keeps every position; `WindowCache` only the last r + 1 (a ring buffer), all that
self-attention restricted to r previous positions reads (`aiayn.model.window`), so decoding memory
stops growing with the output's length.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class KVCache(nn.Module):
    """Keys and values of decoder self-attention for positions decoded so far (preallocated).

    Buffers are (batch, heads, max_len, d_k) and (batch, heads, max_len, d_v); `append` writes the
    new step in place and returns views of everything up to it, so a decoding step never copies
    the whole prefix.
    """

    def __init__(
        self,
        batch: int,
        heads: int,
        max_len: int,
        d_k: int,
        dtype: torch.dtype,
        device,
        d_v: int | None = None,
    ):
        super().__init__()
        self.k = torch.empty(batch, heads, max_len, d_k, dtype=dtype, device=device)
        self.v = torch.empty(batch, heads, max_len, d_v or d_k, dtype=dtype, device=device)
        self.length = 0  # positions decoded so far

    @property
    def filled(self) -> int:
        """The buffers' slots that hold keys and values: the first `filled` along their third axis."""
        return self.length

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k (batch, heads, new, d_k), v (batch, heads, new, d_v) -> all cached keys and values."""
        end = self.length + k.size(2)
        if end > self.k.size(2):
            raise RuntimeError(f"KV cache holds {self.k.size(2)} positions; step {end} does not fit")
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def reorder(self, index: Tensor) -> None:
        """Rows follow `index` (batch',): beam search keeps the prefixes it selected.

        When batch' is smaller than the buffer (finished sentences dropped) the kept rows move to the
        front of the same buffers, which then end at batch' (`_compacted`: a new buffer of the whole
        capacity, |source| + 300 positions when parsing, costs the CPU fresh pages every time a
        sentence ends); only the positions decoded so far are copied. Otherwise only the rows that
        take another row's prefix are copied: on the CPU the cache is larger than the caches, and
        beam search keeps most rows in place (`aiayn.decode.strategies`).
        """
        if index.numel() != self.k.size(0):
            self.k, self.v = self._compacted(self.k, index), self._compacted(self.v, index)
            return
        moved = (index != torch.arange(index.numel(), device=index.device)).nonzero()[:, 0]  # (m,)
        if moved.numel() == 0:
            return
        source = index[moved]
        for buffer in (self.k, self.v):
            prefix = buffer[:, :, : self.filled]  # a view: index_copy_ writes into the buffer
            prefix.index_copy_(0, moved, prefix.index_select(0, source))  # gather first: rows overlap

    def _compacted(self, buffer: Tensor, index: Tensor) -> Tensor:
        """Rows `index` (batch',) of `buffer`, their first `filled` slots copied: into the front of
        `buffer` itself (a view of its first batch' rows) when it has that many rows, else anew."""
        rows = index.numel()
        kept = buffer[:, :, : self.filled].index_select(0, index)  # gathered first: the rows overlap
        out = buffer[:rows] if rows <= buffer.size(0) else buffer.new_empty((rows, *buffer.shape[1:]))
        out[:, :, : self.filled] = kept
        return out


class WindowCache(KVCache):
    """The last `window` + 1 positions' keys and values in a ring buffer (`aiayn.model.window`).

    Position t is kept in slot t mod capacity, capacity = min(window + 1, max_len); attention
    needs no order among its keys (the positions are in the embeddings, 3.5), so `append` returns
    the filled slots as they lie: the new position and the `window` before it. Beam search's
    `reorder` moves whole rows, which the inherited code does over the filled slots.
    """

    def __init__(self, batch: int, heads: int, window: int, max_len: int, d_k: int, dtype, device, d_v=None):
        super().__init__(batch, heads, min(window + 1, max_len), d_k, dtype, device, d_v)

    @property
    def filled(self) -> int:
        return min(self.length, self.k.size(2))

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k (batch, heads, 1, d_k), v (batch, heads, 1, d_v), one new position -> the cached keys
        (batch, heads, filled, d_k) and values (batch, heads, filled, d_v), the new one among them."""
        if k.size(2) != 1:
            raise RuntimeError(f"a window cache takes one position per step, not {k.size(2)}")
        slot = self.length % self.k.size(2)
        self.k[:, :, slot] = k[:, :, 0]
        self.v[:, :, slot] = v[:, :, 0]
        self.length += 1
        return self.k[:, :, : self.filled], self.v[:, :, : self.filled]
