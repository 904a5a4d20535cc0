"""Blockwise row maximum and top-k equal PyTorch's `max` and `topk` (aiayn.runtime.blockwise)."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.runtime import blockwise
from aiayn.runtime.blockwise import BLOCK, row_max, row_topk

# widths: whole blocks only, a tail of one column, a tail of BLOCK - 1, a prime
WIDTHS = [16 * BLOCK, 16 * BLOCK + 1, 40 * BLOCK - 1, 8009]


def _rows(width: int, seed: int, ties: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    rows = -(-blockwise.MIN_NUMEL // width)  # enough rows to take the blocked path
    if ties:  # few distinct values: many equal maxima per row, in different blocks
        return torch.randint(0, 5, (rows, width), generator=g).float()
    return torch.randn(rows, width, generator=g)


def _first_max_index(x: torch.Tensor) -> torch.Tensor:
    """(rows,) the first column holding each row's maximum, computed without max(dim)."""
    is_max = x == x.amax(dim=1, keepdim=True)
    col = torch.arange(x.size(1)).expand_as(x)
    return torch.where(is_max, col, x.size(1)).amin(dim=1)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("ties", [False, True])
def test_row_max_equals_max_and_returns_the_first_maximum(width, ties):
    x = _rows(width, width, ties)
    assert blockwise._blocked(x)
    values, index = row_max(x)
    expected = x.max(dim=1)
    assert torch.equal(values, expected.values)
    assert torch.equal(index, _first_max_index(x))
    assert torch.equal(index, expected.indices)


def test_row_max_finds_a_maximum_in_the_tail_and_in_a_later_block():
    width = 20 * BLOCK + 7
    x = _rows(width, 0, ties=False)
    x[0, -1] = 100.0  # the tail's last column
    x[1, 3 * BLOCK + 5] = 100.0  # a later block than the first
    x[1, 9 * BLOCK] = 100.0  # equal and later: the first one wins
    x[2, :] = -math.inf  # every column banned: column 0, as max returns
    values, index = row_max(x)
    assert index[:3].tolist() == [width - 1, 3 * BLOCK + 5, 0]
    assert values[:3].tolist() == [100.0, 100.0, -math.inf]
    assert torch.equal(index, x.max(dim=1).indices)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("k", [1, 8, 16])
@pytest.mark.parametrize("ties", [False, True])
def test_row_topk_equals_topk(width, k, ties):
    x = _rows(width, k + width, ties)
    x[0, -3:] = 50.0  # the top three in the tail
    x[1, ::BLOCK] = 60.0  # the top values one per block, more of them than k
    values, index = row_topk(x, k)
    expected = x.topk(k, dim=1)
    assert torch.equal(values, expected.values)  # the same values, sorted
    assert torch.equal(x.gather(1, index), values)  # indices point at them
    assert all(len(set(row)) == k for row in index.tolist())  # distinct columns
    if not ties:
        assert torch.equal(index[2:], expected.indices[2:])


def test_row_topk_with_most_of_a_row_at_minus_infinity():
    """Beam search's first step: only one beam of a sentence is live; the rest are -inf."""
    x = torch.full((16, 4 * 8000), -math.inf)
    x[:, :8000] = torch.randn(16, 8000, generator=torch.Generator().manual_seed(3))
    values, index = row_topk(x, 8)
    assert torch.equal(values, x.topk(8, dim=1).values)
    assert bool((index < 8000).all())


def test_small_inputs_and_large_k_take_pytorchs_own(monkeypatch):
    x = torch.randn(2, 8000)  # one sentence's rows: fewer elements than MIN_NUMEL
    assert not blockwise._blocked(x)
    assert torch.equal(row_max(x).indices, x.max(dim=1).indices)
    wide = torch.randn(64, 16 * BLOCK)
    assert blockwise._blocked(wide)  # blocked for max, but k > its 16 blocks: topk's own
    assert torch.equal(row_topk(wide, 17).values, wide.topk(17, dim=1).values)


def test_nan_and_half_precision_and_non_contiguous_rows():
    exact = dict(rtol=0, atol=0, equal_nan=True)
    x = torch.randn(64, 20 * BLOCK + 3, generator=torch.Generator().manual_seed(5))
    x[0, 5 * BLOCK + 2] = float("nan")  # max and topk rank NaN first
    x[1, -1] = float("nan")  # in the tail
    for y in (x, x.to(torch.bfloat16), x.t().contiguous().t()):  # the last: rows not contiguous
        values, index = row_max(y)
        torch.testing.assert_close(values, y.max(dim=1).values, **exact)
        assert torch.equal(index, y.max(dim=1).indices)
        values, index = row_topk(y, 8)
        torch.testing.assert_close(values, y.topk(8, dim=1).values, **exact)
        torch.testing.assert_close(y.gather(1, index), values, **exact)


def test_searches_give_the_same_hypotheses_with_and_without_blocks(monkeypatch):
    """Greedy and beam search of a small model: the blocked path changes nothing."""
    from aiayn.config import DecodeConfig, ModelConfig
    from aiayn.decode.generate import decode_batch
    from aiayn.model.transformer import Transformer

    torch.manual_seed(0)
    config = ModelConfig(vocab_size=4096, d_model=32, n_layers=1, n_heads=2, d_ff=64, dropout=0.0)
    model = Transformer(config).eval()
    src = torch.randint(4, 4096, (24, 9))
    src[:, -1] = config.eos_id
    results = {}
    for min_numel in (1 << 40, 1):  # never blocked, always blocked
        monkeypatch.setattr(blockwise, "MIN_NUMEL", min_numel)
        results[min_numel] = [
            [(h.tokens, h.score) for h in hyps]
            for beam in (1, 4)
            for hyps in decode_batch(model, src, DecodeConfig(beam_size=beam, max_len_b=12))
        ]
    assert results[1 << 40] == results[1]
