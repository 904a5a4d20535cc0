"""The Vision Transformer made of aiayn's encoder (patches and 2-D positions: test_patches.py)."""

import pytest
import torch

from aiayn.config import ConfigError, ModelConfig
from aiayn.model.layers import LayerSettings
from aiayn.model.transformer import Encoder
from aiayn.vision.model import VisionConfig, VisionTransformer
from aiayn.vision.patches import patchify, sinusoidal_2d


def tiny_config(**changes) -> VisionConfig:
    base = dict(patch_size=7, d_model=32, d_ff=64, n_heads=4, n_layers=2, stem_channels=0)
    return VisionConfig(**{**base, **changes})


def test_the_encoder_is_aiayns_and_pre_norm_with_a_final_norm():
    model = VisionTransformer(tiny_config())
    assert type(model.encoder) is Encoder
    assert model.encoder.norm is not None
    assert all(layer.attn_res.norm_first for layer in model.encoder.layers)


def test_shapes_and_attention_maps():
    config = tiny_config(patch_size=4)  # 7 x 7 = 49 patches + the class token
    model = VisionTransformer(config).eval()
    images = torch.rand(5, 1, 28, 28)
    logits, weights = model.attention_maps(images)
    assert logits.shape == (5, 10)
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (5, 4, 50, 50)
        torch.testing.assert_close(w.sum(-1), torch.ones(5, 4, 50), atol=1e-6, rtol=0)
    assert model.embed(images).shape == (5, 50, 32)


def test_fused_and_explicit_attention_give_the_same_logits():
    model = VisionTransformer(tiny_config())
    torch.nn.init.normal_(model.head.weight)  # the head starts at zero; make the logits informative
    model.eval()
    images = torch.rand(4, 1, 28, 28)
    torch.testing.assert_close(model(images), model.attention_maps(images)[0], atol=1e-5, rtol=1e-5)


def test_small_patches_with_an_attention_window():
    """2 x 2 patches: 196 tokens + the class token, each attending to r = 14 on either side (one row
    of the grid); the blocked path equals the dense band of the attention maps, and in one layer
    the class token reads only the first r patches."""
    model = VisionTransformer(tiny_config(patch_size=2, attention_window=14, n_layers=1))
    torch.nn.init.normal_(model.head.weight)
    model.eval()
    images = torch.rand(3, 1, 28, 28)
    logits, weights = model.attention_maps(images)
    torch.testing.assert_close(model(images), logits, atol=1e-5, rtol=1e-5)
    assert weights[0].shape == (3, 4, 197, 197) and weights[0][:, :, 0, 15:].abs().max() == 0
    far = images.clone()
    far[:, :, 20:] = 0.5  # rows 10..13 of the 14 x 14 grid: tokens far past the class token's window
    torch.testing.assert_close(model(far), model(images), atol=1e-6, rtol=0)
    with pytest.raises(ConfigError, match="attention_window must be positive or null, got 0"):
        tiny_config(attention_window=0)


def test_parameter_count_matches_the_architecture():
    c = tiny_config(patch_size=7)
    d, f, n = c.d_model, c.d_ff, c.n_patches
    layer = (4 * d * d + 4 * d) + (2 * d * f + f + d) + 2 * 2 * d  # attention, FFN, two LayerNorms
    expected = (49 * d + d) + d + (n + 1) * d + c.n_layers * layer + 2 * d + (d * 10 + 10)
    assert VisionTransformer(c).num_parameters() == expected


def test_sinusoidal_positions_are_fixed_and_not_saved():
    model = VisionTransformer(tiny_config(positions="sinusoidal"))
    assert "positions" not in dict(model.named_parameters())
    assert "positions" not in model.state_dict()
    table = sinusoidal_2d(4, 4, 32).float()
    assert torch.equal(model.positions[0], torch.zeros(32))  # the class token has no place
    assert torch.equal(model.positions[1:], table)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(patch_size=5), "not a multiple of patch_size"),
        (dict(positions="sinusoidal", d_model=30, n_heads=3), "divisible by 4"),
        (dict(positions="rotary"), "positions="),
        (dict(n_heads=5), "not divisible by n_heads"),
        (dict(n_classes=1), "at least 2"),
        (dict(stem_channels=-1), "stem_channels"),
        (dict(patch_size=0), "patch_size must be positive, got 0"),
        (dict(channels=0), "channels must be positive, got 0"),
        (dict(pixel_std=float("nan")), "pixel_std must be a finite number > 0, got nan"),
        (dict(pixel_mean=float("inf")), "pixel_mean must be a finite number, got inf"),
    ],
)
def test_bad_configs_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**changes)


def test_the_encoder_reads_the_vision_config_itself():
    """No ModelConfig with a placeholder vocabulary in between: VisionConfig has every setting a
    stack of 3.1 layers reads (LayerSettings), at the text model's defaults where it has no field."""
    c = tiny_config(norm_first=False)
    text = ModelConfig()
    for name in LayerSettings.__annotations__:
        assert hasattr(text, name) and hasattr(c, name), name
    assert (c.key_dim, c.value_dim, c.use_final_norm) == (c.d_model // c.n_heads,) * 2 + (False,)
    assert (c.activation_dropout, c.layer_norm_eps) == (text.activation_dropout, text.layer_norm_eps)
    encoder = VisionTransformer(c).encoder
    assert encoder.norm is None and len(encoder.layers) == c.n_layers
    assert encoder.layers[0].ffn.linear1.out_features == c.d_ff


def test_pixels_are_normalised_inside_the_model():
    model = VisionTransformer(tiny_config(pixel_mean=0.5, pixel_std=0.25))
    images = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        expected = model.patch_embed(patchify((images - 0.5) / 0.25, 7))
        got = model.embed(images)[:, 1:] - model.positions[1:]
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def test_hybrid_stem_is_a_3x3_convolution_then_the_same_patches():
    """stem_channels > 0: each patch vector is cut from GELU(conv3x3(image)) maps, not the pixels;
    checked against F.conv2d and an explicit loop over one patch, and saved with the model."""
    model = VisionTransformer(tiny_config(patch_size=7, stem_channels=3)).eval()
    images = torch.rand(2, 1, 28, 28)
    conv = model.stem[0]
    with torch.no_grad():
        maps = torch.nn.functional.gelu(
            torch.nn.functional.conv2d((images - 0.286) / 0.353, conv.weight, conv.bias, padding=1)
        )  # (2, 3, 28, 28)
        patch = maps[:, :, 7:14, 14:21].permute(0, 2, 3, 1).reshape(2, -1)  # grid row 1, column 2
        expected = model.patch_embed(patch)
        got = model.embed(images)[:, 1 + 1 * 4 + 2] - model.positions[1 + 1 * 4 + 2]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert model.patch_embed.in_features == 3 * 49
    assert model.num_parameters() == VisionTransformer(tiny_config(patch_size=7)).num_parameters() + (
        (3 * 9 + 3) + (3 - 1) * 49 * 32
    )
    assert model(images).shape == (2, 10)
