"""Section 3.4 and 3.5: scaled embeddings and positional encodings, checked against the formulas."""

import math

import pytest
import torch

from aiayn.model.embedding import LearnedPositions, SinusoidalPositions, TokenEmbedding


def formula(pos: int, dim: int, d_model: int) -> float:
    """3.5 written out: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same)."""
    i2 = dim - dim % 2
    angle = pos / 10000 ** (i2 / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def test_sinusoids_equal_the_formula_up_to_position_10000():
    d_model = 64
    pe = SinusoidalPositions(d_model, initial=16)(10001)  # grows past its initial table
    ref = torch.tensor(
        [[formula(p, j, d_model) for j in range(d_model)] for p in range(10001)], dtype=torch.float64
    )
    assert pe.shape == (10001, d_model)
    torch.testing.assert_close(pe.double(), ref, rtol=0, atol=1e-7)


def test_concat_layout_puts_sines_then_cosines():
    d_model = 8
    pe = SinusoidalPositions(d_model, layout="concat")(50).double()
    for p in (0, 7, 49):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            assert pe[p, i].item() == pytest.approx(math.sin(angle), abs=1e-7)
            assert pe[p, d_model // 2 + i].item() == pytest.approx(math.cos(angle), abs=1e-7)


def test_positions_with_an_offset_are_the_same_rows():
    pos = SinusoidalPositions(32)
    assert torch.equal(pos(5, offset=700), pos(705)[700:])


def test_learned_positions_refuse_lengths_past_their_table():
    pos = LearnedPositions(10, 8)
    assert pos(10).shape == (10, 8)
    with pytest.raises(ValueError, match="max_positions=10"):
        pos(3, offset=8)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    emb = TokenEmbedding(20, 16)
    tokens = torch.tensor([[3, 5, 7]])
    torch.testing.assert_close(emb(tokens), emb.weight[tokens] * 4.0)
    assert abs(emb.weight.std().item() - 16**-0.5) < 0.05  # N(0, d_model^-0.5)


def test_a_meta_embedding_is_not_drawn_and_a_real_one_is():
    """Shapes-only models (`check_fits`) skip the N(0, d^-0.5) draw; real ones are drawn as before."""
    with torch.device("meta"):
        meta = TokenEmbedding(20, 16)
    assert meta.weight.is_meta and meta.weight.shape == (20, 16)
    torch.manual_seed(3)
    drawn = TokenEmbedding(4000, 64).weight
    torch.manual_seed(3)
    expected = torch.empty(4000, 64).normal_(0, 64**-0.5)
    assert torch.equal(drawn, expected)
