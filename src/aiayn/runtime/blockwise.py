"""The search's per-row maximum and top-k over the vocabulary (6.1), by blocks on the CPU.

PyTorch's CPU `max(dim)` and `topk` keep an index next to every value they compare and run a
scalar loop: 130-300 us for 32 rows x 8,000 log-probabilities, 550 us for beam search's top 8 of
32 x 32,000 candidates, which is 5-6% of a decoding step of a small model on one core. `amax`
(the values alone) is vectorized and ten times faster. So the rows are cut into blocks of
`BLOCK` columns, each block's maximum taken with `amax`, and the exact search runs only inside the
blocks that can hold the answer: the maximum lies in the block with the largest maximum; the k
largest values lie in the k blocks with the largest maxima (a block outside them has a maximum,
and so every value, below k values of other blocks). Columns after the last whole block are
added as candidates of their own. Results equal `max` and `topk`'s: the same values; the same
indices (`row_max`: the first maximum, as `max` returns; `row_topk`: among equal values any, as
`topk` promises).

Small inputs (one sentence's row) and other devices take PyTorch's own, where blocks cost more
than they save.
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK = 64  # columns per block: amax over 64 floats is 8 AVX2 vectors
MIN_NUMEL = 1 << 16  # below this PyTorch's own is as fast (a few rows of a small vocabulary)


def _blocked(x: Tensor) -> bool:
    return x.device.type == "cpu" and x.dim() == 2 and x.numel() >= MIN_NUMEL and x.size(1) >= 16 * BLOCK


def _candidates(x: Tensor, blocks: Tensor) -> tuple[Tensor, Tensor]:
    """The values (rows, c * BLOCK + tail) of the chosen blocks (rows, c) and of the columns after
    the last whole block, and their column indices in x (same shape)."""
    rows, width = x.shape
    whole = width // BLOCK * BLOCK
    offsets = torch.arange(BLOCK, device=x.device)
    index = (blocks[:, :, None] * BLOCK + offsets).view(rows, -1)  # (rows, c * BLOCK)
    if whole < width:
        tail = torch.arange(whole, width, device=x.device).expand(rows, -1)  # (rows, tail)
        index = torch.cat([index, tail], dim=1)
    return x.gather(1, index), index


def _block_maxima(x: Tensor) -> Tensor:
    """x (rows, width) -> the maximum of each whole block of BLOCK columns (rows, width // BLOCK)."""
    rows, width = x.shape
    return x[:, : width // BLOCK * BLOCK].view(rows, -1, BLOCK).amax(dim=-1)


def row_max(x: Tensor) -> tuple[Tensor, Tensor]:
    """`x.max(dim=-1)` for x (rows, width): values (rows,) and the index of each row's first maximum."""
    if not _blocked(x):
        return x.max(dim=-1)
    best = _block_maxima(x).argmax(dim=-1, keepdim=True)  # (rows, 1): the first block holding it
    values, index = _candidates(x, best)  # (rows, BLOCK + tail)
    values, at = values.max(dim=-1)  # the first in the block, or in the tail if larger
    return values, index.gather(1, at[:, None])[:, 0]


def row_topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """`x.topk(k, dim=-1)` for x (rows, width): the k largest values per row, sorted, and indices."""
    if not _blocked(x) or k > x.size(1) // BLOCK:
        return x.topk(k, dim=-1)
    blocks = _block_maxima(x).topk(k, dim=-1).indices  # (rows, k)
    values, index = _candidates(x, blocks)  # (rows, k * BLOCK + tail)
    values, at = values.topk(k, dim=-1)  # (rows, k), sorted
    return values, index.gather(1, at)
