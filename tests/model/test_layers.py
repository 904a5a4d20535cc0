"""The layers of section 3.1 and the feed-forward network of 3.3 (aiayn.model.layers) against float64
recomputations: eq. 2, LayerNorm(x + Sublayer(x)) (post-norm) and x + Sublayer(LayerNorm(x)) (pre-norm),
and the decoder's causal self-attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from aiayn.config import ModelConfig
from aiayn.model.layers import DecoderLayer, EncoderLayer, FeedForward


def config(norm_first: bool) -> ModelConfig:
    return ModelConfig.preset("tiny", vocab_size=16, dropout=0.0, norm_first=norm_first)


@pytest.mark.parametrize("activation, act", [("relu", F.relu), ("gelu", F.gelu), ("swish", F.silu)])
def test_the_feed_forward_network_is_eq_2(activation, act):
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, activation).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)  # (batch, len, d_model)
    w1, b1, w2, b2 = ffn.linear1.weight, ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias
    expected = act(x @ w1.T + b1) @ w2.T + b2
    torch.testing.assert_close(ffn(x), expected)
    if activation == "relu":
        assert torch.equal(act(x @ w1.T + b1), torch.clamp(x @ w1.T + b1, min=0))  # max(0, x W1 + b1)


@pytest.mark.parametrize("norm_first", [False, True])
def test_an_encoder_layer_wraps_each_sub_layer_in_a_residual_and_a_norm(norm_first):
    torch.manual_seed(1)
    layer = EncoderLayer(config(norm_first)).double().eval()
    x = torch.randn(2, 6, layer.ffn.linear1.in_features, dtype=torch.float64)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False  # the second sentence's last two positions are padding
    attn = lambda h: layer.self_attn(h, mask=mask)[0]  # noqa: E731
    n1, n2 = layer.attn_res.norm, layer.ffn_res.norm
    if norm_first:
        y = x + attn(n1(x))
        expected = y + layer.ffn(n2(y))
    else:
        y = n1(x + attn(x))
        expected = n2(y + layer.ffn(y))
    torch.testing.assert_close(layer(x, mask)[0], expected)


def test_a_decoder_layer_sees_no_later_position():
    """3.2.3: changing the target after position t leaves the outputs up to t as they were."""
    torch.manual_seed(2)
    layer = DecoderLayer(config(False)).double().eval()
    d = layer.ffn.linear1.in_features
    x, memory = torch.randn(1, 7, d, dtype=torch.float64), torch.randn(1, 4, d, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 3, d, dtype=torch.float64)
    out, changed_out = layer(x, memory)[0], layer(changed, memory)[0]  # (1, 7, d) each
    torch.testing.assert_close(out[:, :4], changed_out[:, :4])
    assert not torch.allclose(out[:, 4:], changed_out[:, 4:])
