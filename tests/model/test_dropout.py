"""aiayn.model.dropout: F.dropout's contract from a cheaper random mask."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.model.dropout import LANE_BITS, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_each_element_is_dropped_with_probability_p(p):
    n = 1 << 20
    keep, scale = keep_mask(torch.Size([n]), p)
    dropped = 1.0 - keep.double().mean().item()
    p_used = round(p * (1 << LANE_BITS)) / (1 << LANE_BITS)
    assert abs(p_used - p) <= 2**-16
    assert abs(dropped - p_used) < 5 * math.sqrt(p * (1 - p) / n)  # 5 standard errors
    assert scale == pytest.approx(1 / (1 - p_used), rel=1e-12)


def test_masks_are_independent_across_lanes_and_positions():
    """Every one of the four lanes of a 64-bit draw (the top one has a constant bit) drops at the
    same rate, and neighbours are uncorrelated."""
    keep, _ = keep_mask(torch.Size([1 << 20]), 0.5)
    lanes = keep.view(-1, 4).double()
    n = lanes.size(0)
    assert torch.all((lanes.mean(0) - 0.5).abs() < 5 * 0.5 / math.sqrt(n)), lanes.mean(0)
    k = keep.double() - 0.5
    assert abs((k[1:] * k[:-1]).mean().item()) < 5 * 0.25 / math.sqrt(k.numel())


def test_output_and_gradient_use_one_mask_and_keep_the_expectation():
    x = torch.randn(64, 33, 17, dtype=torch.float32, requires_grad=True)  # an odd element count
    y = dropout(x, 0.25)
    kept = y != 0
    _, scale = keep_mask(torch.Size([1]), 0.25)
    torch.testing.assert_close(y[kept], x.detach()[kept] * scale, rtol=1e-6, atol=0)
    g = torch.randn_like(y)
    y.backward(g)
    torch.testing.assert_close(x.grad, torch.where(kept, g * scale, 0.0), rtol=1e-6, atol=0)
    ones = dropout(torch.ones(1 << 20, dtype=torch.float64), 0.25)
    assert ones.mean().item() == pytest.approx(1.0, abs=5 * math.sqrt(0.25 / 0.75 / (1 << 20)))


def test_the_seed_decides_the_mask():
    x = torch.randn(1000)
    torch.manual_seed(3)
    a = dropout(x, 0.1)
    torch.manual_seed(3)
    b = dropout(x, 0.1)
    c = dropout(x, 0.1)
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("p", [1e-6, 0.99999])
def test_p_within_a_lane_step_of_0_or_1_is_pytorch_s_dropout(p):
    """round(p * 2^15) would be 0 (nothing dropped) or 2^15 (everything, scale 1/0)."""
    x = torch.randn(4096)
    y = dropout(x, p)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    with pytest.raises(ValueError, match="use F.dropout"):
        keep_mask(x.shape, p)


def test_identity_where_pytorch_is_and_pytorch_outside_the_fast_path():
    x = torch.randn(100)
    assert dropout(x, 0.1, training=False) is x and dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), F.dropout(x, 1.0))  # all zeros
    torch.manual_seed(0)
    half = dropout(x.half(), 0.5)
    assert half.dtype == torch.float16 and ((half == 0) | (half == 2 * x.half())).all()
