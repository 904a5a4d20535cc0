"""Class-token attention and attention rollout (aiayn.vision.attention)."""

import numpy as np
import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.vision.attention import attention_rollout, class_token_attention, patch_map


def random_weights(layers: int, batch: int = 2, heads: int = 3, tokens: int = 5) -> list[torch.Tensor]:
    return [torch.rand(batch, heads, tokens, tokens).softmax(-1) for _ in range(layers)]


def test_class_token_attention_is_the_head_mean_of_row_zero():
    weights = random_weights(3)
    got = class_token_attention(weights, layer=1)
    expected = weights[1].double().numpy().mean(axis=1)[:, 0, 1:]
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=1e-6)
    with pytest.raises(AiaynError, match="out of range"):
        class_token_attention(weights, layer=3)


def test_rollout_of_one_layer_without_residual_is_its_class_token_attention():
    weights = random_weights(1)
    torch.testing.assert_close(attention_rollout(weights, residual=0.0), class_token_attention(weights))


def test_rollout_of_uniform_attention_has_a_closed_form():
    # A = 0.5 U + 0.5 I with U uniform (U @ U = U): A @ A = 0.75 U + 0.25 I, so each patch gets 0.75 / T.
    tokens = 5
    weights = [torch.full((1, 2, tokens, tokens), 1.0 / tokens) for _ in range(2)]
    torch.testing.assert_close(attention_rollout(weights), torch.full((1, tokens - 1), 0.75 / tokens))


def test_rollout_matches_a_float64_loop():
    weights = random_weights(4)
    got = attention_rollout(weights).double().numpy()
    for b in range(2):
        flow = np.eye(5)
        for w in weights:
            a = 0.5 * w[b].double().numpy().mean(axis=0) + 0.5 * np.eye(5)
            a /= a.sum(axis=1, keepdims=True)
            flow = a @ flow
        np.testing.assert_allclose(got[b], flow[0, 1:], rtol=1e-6)


def test_patch_map_spreads_each_score_over_its_pixels():
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    heat = patch_map(scores, grid=2, image_size=6)[0]
    assert heat.shape == (6, 6)
    assert torch.equal(heat[:3, :3], torch.full((3, 3), 0.25))
    assert torch.equal(heat[3:, 3:], torch.ones(3, 3))
    assert torch.equal(heat[:3, 3:], torch.full((3, 3), 0.5))
