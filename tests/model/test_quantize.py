"""int8 inference (aiayn.model.quantize): what is quantised, and how close its logits stay to float32.

The tolerance: on a small random model the int8 logits differ from float32 by at most 5% in
relative (Frobenius) norm. Correct quantisation measures 1.5-2% (2.5-3.5% with the 7-bit inputs
of CPUs without VNNI); deliberately wrong ones measure 16% (weights rounded to 4 bits) and 31%
(biases dropped), and a test checks that the tolerance rejects them.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.stepper import decode_batch
from aiayn.errors import AiaynError
from aiayn.model.quantize import Int8Linear, check_int8_device, int8_linear, is_int8, quantize_int8
from aiayn.model.transformer import Transformer

TOLERANCE = 0.05  # |int8 - fp32| / |fp32| over all logits of a batch


def random_model(seed: int, tie: str = "all") -> Transformer:
    """A small random model with non-zero biases (Transformer initialises them to zero)."""
    torch.manual_seed(seed)
    config = ModelConfig(
        vocab_size=96, d_model=64, d_ff=128, n_heads=4, n_layers=2, dropout=0.0, tie_embeddings=tie,
        final_logits_bias=True,
    )  # fmt: skip
    model = Transformer(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and "norm" not in name:
                p.normal_(0, 0.1)
    return model


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 96, (6, 12), generator=g), torch.randint(4, 96, (6, 10), generator=g)


def relative_error(model: nn.Module, reference: nn.Module, seed: int) -> float:
    src, tgt = inputs(seed)
    with torch.inference_mode():
        ours, theirs = model(src, tgt), reference(src, tgt)
    return float((ours - theirs).norm() / theirs.norm())


def test_every_linear_layer_and_the_output_layer_become_int8():
    model = random_model(0)
    n = model.num_parameters()
    assert quantize_int8(model) is model and is_int8(model)
    assert not any(type(m) is nn.Linear for m in model.modules())
    layers = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert len(layers) == 2 * 4 + 2 * 7 + 1  # encoder: qkv, out, 2 FFN; decoder: + cross q, kv, out; output
    assert model.output_layer in layers
    weight = model.output_layer.weight()
    assert weight.dtype == torch.qint8 and weight.q_per_channel_scales().shape == (96,)  # one scale a row
    assert not weight.q_per_channel_zero_points().any()  # symmetric
    assert model.num_parameters() == n  # counted as before quantisation
    assert quantize_int8(model) is model  # a second call changes nothing
    assert len([m for m in model.modules() if isinstance(m, Int8Linear)]) == len(layers)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tie", ["all", "none"])
def test_int8_logits_are_close_to_float32(seed, tie):
    reference = random_model(seed, tie)
    model = quantize_int8(copy.deepcopy(reference))
    error = relative_error(model, reference, seed)
    assert 1e-4 < error <= TOLERANCE  # quantised (not equal), and close


def test_output_layer_can_stay_float32():
    reference = random_model(0)
    model = quantize_int8(copy.deepcopy(reference), output_layer=False)
    assert model.output_layer is None
    assert relative_error(model, reference, 0) <= TOLERANCE


def _wrongly_quantised(reference: Transformer, kind: str) -> Transformer:
    """quantize_int8 with a deliberate bug: weights rounded to 4 bits, or biases dropped."""
    model = copy.deepcopy(reference)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                weight, bias = child.weight.detach(), child.bias
                if kind == "4-bit weights":
                    scale = weight.abs().amax(1, keepdim=True) / 7
                    weight = (weight / scale).round() * scale
                setattr(module, name, int8_linear(weight, None if kind == "no bias" else bias))
    model.output_layer = int8_linear(model.output_weight, model.output_bias)
    return model


@pytest.mark.parametrize("kind", ["4-bit weights", "no bias"])
def test_the_tolerance_rejects_a_wrong_quantisation(kind):
    reference = random_model(0)
    assert relative_error(_wrongly_quantised(reference, kind), reference, 0) > TOLERANCE


def test_int8_linear_against_float():
    torch.manual_seed(0)
    weight, bias, x = torch.randn(40, 24), torch.randn(40), torch.randn(3, 5, 24)
    expected = torch.nn.functional.linear(x, weight, bias)
    got = int8_linear(weight, bias)(x)
    assert got.shape == expected.shape and got.dtype == torch.float32
    assert float((got - expected).norm() / expected.norm()) < 0.02


@pytest.mark.parametrize("rows", [1, 16, 128])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_extreme_inputs_and_weights_do_not_overflow(rows, sign):
    """Non-negative inputs (as after the FFN's ReLU) at the top of their range, times weights at
    the end of theirs: 8-bit inputs make pairs of products of 2 x 255 x 127, which an int16
    accumulation (x86 without VNNI) would saturate to about half. 8-bit inputs are used only on
    CPUs with VNNI; this is what would fail if they were used elsewhere.
    """
    weight, x = torch.full((8, 256), sign), torch.ones(rows, 256)
    got = int8_linear(weight)(x)
    torch.testing.assert_close(got, torch.full((rows, 8), 256.0 * sign), rtol=0.01, atol=0)


@pytest.mark.parametrize("beam", [1, 4])
def test_int8_model_decodes_with_the_cache(beam):
    model = quantize_int8(random_model(0))
    src, _ = inputs(0)
    with torch.inference_mode():
        hyps = decode_batch(model, src, DecodeConfig(beam_size=beam, max_len_a=0.0, max_len_b=8))
    assert len(hyps) == src.size(0) and all(h and len(h[0].tokens) <= 8 for h in hyps)


@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 0)])
def test_a_cuda_device_is_a_one_line_error(device):
    with pytest.raises(AiaynError, match=r"^int8 inference \(--int8\) runs on the CPU only, not on cuda"):
        check_int8_device(device)
    assert check_int8_device(None) == torch.device("cpu") == check_int8_device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_model_on_the_gpu_is_refused():
    with pytest.raises(AiaynError, match="runs on the CPU only"):
        quantize_int8(random_model(0).cuda())
