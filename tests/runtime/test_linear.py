"""The oneDNN-routed linear layer: values and gradients against float64 F.linear; fallbacks."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.generate import decode_batch
from aiayn.model.layers import FeedForward
from aiayn.model.transformer import Transformer
from aiayn.runtime import linear as linear_module
from aiayn.runtime.linear import (
    EXACT_ROWS,
    KERNELS,
    ROW_PROBES,
    PackedFeedForward,
    PackedLinear,
    RoutedLinear,
    RoutedOutputLayer,
    _OneDNNLinear,
    _use_onednn,
    linear,
    linear_backend,
    pack_for_inference,
    padded_rows,
    panels_available,
    route_linears,
    row_class,
)
from aiayn.runtime.quantize import Int8Linear, quantize_int8

needs_onednn = pytest.mark.skipif(not linear_backend.enabled, reason="oneDNN routing unavailable or off")


def float64_reference(x, weight, bias, grad):
    """y = x W^T + b and its gradients, in float64 with plain autograd."""
    x64, w64 = x.double().requires_grad_(), weight.double().requires_grad_()
    b64 = bias.double().requires_grad_() if bias is not None else None
    y = F.linear(x64, w64, b64)
    y.backward(grad.double())
    return y, x64.grad, w64.grad, (b64.grad if b64 is not None else None)


@needs_onednn
@pytest.mark.parametrize(
    "shape, d_in, d_out",
    [((6, 5), 24, 40), ((3, 4, 7), 40, 24), ((9,), 16, 16), ((13, 77), 24, 40), ((7, 15), 40, 24)],
)
@pytest.mark.parametrize("with_bias", [True, False])
def test_onednn_linear_matches_float64(shape, d_in, d_out, with_bias):
    """Both weight-gradient layouts (out > in, out < in), 2-D/3-D inputs, and row counts that are
    padded (1001 -> 1008, 105 -> 106 rows) as well as ones that are not."""
    rows_shape = shape if len(shape) > 1 else (shape[0], 1)
    x = torch.randn(*rows_shape, d_in, requires_grad=True)
    weight = torch.randn(d_out, d_in, requires_grad=True)
    bias = torch.randn(d_out, requires_grad=True) if with_bias else None
    grad = torch.randn(*rows_shape, d_out)
    y = _OneDNNLinear.apply(x, weight, bias)
    y.backward(grad)
    ref_y, ref_x, ref_w, ref_b = float64_reference(
        x.detach(), weight.detach(), bias.detach() if with_bias else None, grad
    )
    tol = dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(y.double(), ref_y.detach(), **tol)
    torch.testing.assert_close(x.grad.double(), ref_x, **tol)
    torch.testing.assert_close(weight.grad.double(), ref_w, **tol)
    if with_bias:
        torch.testing.assert_close(bias.grad.double(), ref_b, **tol)


@needs_onednn
def test_gradcheck_through_onednn_for_frozen_input():
    """Only the weight needs a gradient (the input is data): dx is skipped, dW and db are right."""
    x = torch.randn(8, 12)
    weight = torch.randn(20, 12, requires_grad=True)
    bias = torch.randn(20, requires_grad=True)
    (_OneDNNLinear.apply(x, weight, bias) ** 2).sum().backward()
    w64, b64 = weight.detach().double().requires_grad_(), bias.detach().double().requires_grad_()
    (F.linear(x.double(), w64, b64) ** 2).sum().backward()
    torch.testing.assert_close(weight.grad.double(), w64.grad, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(bias.grad.double(), b64.grad, rtol=1e-5, atol=1e-4)


def test_padded_rows_bound_the_shapes_and_the_extra_work():
    """Few distinct shapes (so oneDNN keeps few primitives), never fewer rows, at most 1/32 more."""
    sizes = {padded_rows(rows) for rows in range(1, 16385)}
    assert len(sizes) <= EXACT_ROWS + 32 * 8  # exact up to 64, then 32 per power of two to 2^14
    for rows in range(1, 16385):
        padded = padded_rows(rows)
        assert rows <= padded <= rows * (1 + 1 / 32)
        assert padded_rows(padded) == padded
    assert padded_rows(EXACT_ROWS) == EXACT_ROWS and padded_rows(1001) == 1008


def test_routing_rules():
    weight = torch.randn(8, 4)
    if linear_backend.enabled:
        assert _use_onednn(torch.randn(4, 4), weight)
    assert not _use_onednn(torch.randn(linear_module.MIN_ROWS - 1, 4), weight)  # one decoding row
    assert not _use_onednn(torch.randn(16, 4, dtype=torch.float64), weight.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not _use_onednn(torch.randn(16, 4), weight)


def test_disabled_backend_is_plain_f_linear(monkeypatch):
    monkeypatch.setattr(linear_backend, "enabled", False)
    x, weight, bias = torch.randn(16, 4), torch.randn(8, 4), torch.randn(8)
    assert torch.equal(linear(x, weight, bias), F.linear(x, weight, bias))


def counting_linear(monkeypatch) -> list:
    """Replace `linear` (what routed layers call) by itself plus a record of each call."""
    calls = []

    def counted(x, weight, bias=None):
        calls.append(tuple(weight.shape))
        return F.linear(x, weight, bias)

    monkeypatch.setattr(linear_module, "linear", counted)
    return calls


def test_the_model_computes_with_f_linear_until_routed_from_outside(monkeypatch):
    """The Transformer's own layers never call `linear`; `route_linears` swaps every product (23 in
    a 2-layer model: qkv, out, 2 FFN per encoder layer, + cross q, kv, out per decoder layer, the
    output layer) and keeps the very Parameters, their order and their state-dict names."""
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, d_model=32, d_ff=64, n_heads=2, n_layers=2, dropout=0.0)
    model = Transformer(config).eval()
    reference = copy.deepcopy(model)
    params, names = list(model.parameters()), list(model.state_dict())
    calls = counting_linear(monkeypatch)
    src, tgt = torch.randint(4, 50, (3, 9)), torch.randint(4, 50, (3, 6))
    model(src, tgt)
    assert calls == []
    assert route_linears(model) is model
    assert all(a is b for a, b in zip(model.parameters(), params, strict=True))
    assert list(model.state_dict()) == names and model.output_weight is model.tgt_embed.weight
    assert not any(type(m) is nn.Linear for m in model.modules())
    assert isinstance(model.output_layer, RoutedOutputLayer)
    torch.testing.assert_close(model(src, tgt), reference(src, tgt), rtol=0, atol=0)  # F.linear here
    assert len(calls) == 2 * 4 + 2 * 7 + 1 and calls[-1] == (50, 32)


def test_route_linears_leaves_other_modules_as_they_are():
    model = quantize_int8(Transformer(ModelConfig(vocab_size=50, d_model=32, d_ff=64, n_heads=2, n_layers=1)))
    before = [type(m) for m in model.modules()]
    assert [type(m) for m in route_linears(model).modules()] == before
    assert Int8Linear in before and RoutedLinear not in before


def test_row_counts_take_the_kernel_of_their_nearest_probe():
    """Nearest in log scale: 1 | 2-11 -> 4 | 12-63 -> 32 | 64 and more -> 128."""
    classes = [row_class(rows) for rows in (1, 2, 4, 11, 12, 32, 63, 64, 128, 5000)]
    assert classes == [0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [ROW_PROBES[row_class(p)] for p in ROW_PROBES] == list(ROW_PROBES)


@needs_onednn
@pytest.mark.parametrize(
    "kernels",
    [
        ("packed",) * len(ROW_PROBES),
        ("mkl",) * len(ROW_PROBES),
        ("mkl", "packed", "mkl", "packed"),
        ("packed", "mkl", "packed", "mkl"),
    ],
)
def test_packed_linear_equals_f_linear_at_every_row_count(kernels):
    torch.manual_seed(0)
    weight, bias = torch.randn(300, 64), torch.randn(300)
    layer = PackedLinear(weight, bias, kernels)
    assert (layer.packed is None) == ("packed" not in kernels)  # the packed copy only where it is used
    with torch.inference_mode():
        for rows in (1, 2, 3, 4, 5, 12, 32, 63, 64, 65, 129, 300):
            x = torch.randn(rows, 64, dtype=torch.float64)
            got = layer(x.float())
            assert got.shape == (rows, 300)
            expected = F.linear(x, weight.double(), bias.double())  # float64
            torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-4)
        x = torch.randn(2, 7, 64)  # (batch, len, in) keeps its leading dimensions
        torch.testing.assert_close(layer(x), F.linear(x, weight, bias), rtol=1e-5, atol=1e-4)
        layer.keep(("packed",) * len(ROW_PROBES))  # packed again when a row class takes the packed weight
        torch.testing.assert_close(layer(x), F.linear(x, weight, bias), rtol=1e-5, atol=1e-4)


@needs_onednn
def test_pack_for_inference_keeps_what_the_model_computes(monkeypatch):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=500, d_model=64, d_ff=128, n_heads=4, n_layers=2, dropout=0.0)
    reference = Transformer(config).eval()
    model = copy.deepcopy(reference)
    monkeypatch.setattr(linear_module, "_kernels", lambda layer: ("packed", "mkl", "packed", "packed"))
    assert pack_for_inference(model) == 2 * 4 + 2 * 7 + 1  # every linear layer and the output layer
    assert isinstance(model.output_layer, PackedLinear)
    src, tgt = torch.randint(4, 500, (3, 9)), torch.randint(4, 500, (3, 6))
    with torch.inference_mode():
        torch.testing.assert_close(model(src, tgt), reference(src, tgt), rtol=1e-4, atol=1e-4)
        hyps = decode_batch(model, src, DecodeConfig(beam_size=2, max_len_a=0.0, max_len_b=6))
        expected = decode_batch(reference, src, DecodeConfig(beam_size=2, max_len_a=0.0, max_len_b=6))
    assert [h[0].tokens for h in hyps] == [h[0].tokens for h in expected]


@needs_onednn
def test_pack_for_inference_keeps_no_packed_weight_where_packing_does_not_pay(monkeypatch):
    model = Transformer(ModelConfig(vocab_size=50, d_model=32, d_ff=64, n_heads=2, n_layers=1)).eval()
    monkeypatch.setattr(linear_module, "_kernels", lambda layer: ("mkl",) * len(ROW_PROBES))
    assert pack_for_inference(model) == 0
    layers = [m for m in model.modules() if isinstance(m, PackedLinear)]
    assert len(layers) == 4 + 7 + 1 and all(m.packed is None for m in layers)


@needs_onednn
def test_the_kernels_are_chosen_among_the_timed_ones():
    layer = PackedLinear(torch.randn(96, 32), torch.randn(96))
    kernels = linear_module._kernels(layer)
    assert len(kernels) == len(ROW_PROBES) and set(kernels) <= set(KERNELS)


def test_pack_for_inference_does_nothing_without_onednn_routing(monkeypatch):
    model = Transformer(ModelConfig(vocab_size=50, d_model=32, d_ff=64, n_heads=2, n_layers=1)).eval()
    monkeypatch.setattr(linear_backend, "enabled", False)
    assert pack_for_inference(model) == 0  # oneDNN routing off: nothing is measured or packed
    assert not any(isinstance(m, PackedLinear) for m in model.modules())
    assert isinstance(model.output_layer, RoutedOutputLayer)


@needs_onednn
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize(
    "kernels",
    [
        ("packed",) * len(ROW_PROBES),
        ("mkl",) * len(ROW_PROBES),
        ("packed", "mkl", "packed", "mkl"),
        ("panels",) * len(ROW_PROBES),
        ("panels", "packed", "mkl", "panels"),
    ],
)
def test_packed_feed_forward_computes_eq_2(activation, kernels):
    if "panels" in kernels and not panels_available():
        pytest.skip("the native library (its panel products) is not built here")
    torch.manual_seed(0)
    ffn = FeedForward(48, 96, activation).eval()
    l1, l2 = ffn.linear1, ffn.linear2
    packed = PackedFeedForward(
        PackedLinear(l1.weight, l1.bias, kernels), PackedLinear(l2.weight, l2.bias, kernels), ffn.activation
    )
    with torch.inference_mode():
        for rows in (1, 3, 7, 40, 65, 200, 400):  # every row class, padded rows among them
            x = torch.randn(2, rows, 48)
            h = ffn.activation(F.linear(x.double(), l1.weight.double(), l1.bias.double()))
            expected = F.linear(h, l2.weight.double(), l2.bias.double())  # float64
            torch.testing.assert_close(packed(x).double(), expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_pack_for_inference_puts_packed_feed_forwards_in_place(monkeypatch):
    model = Transformer(ModelConfig(vocab_size=50, d_model=32, d_ff=64, n_heads=2, n_layers=2)).eval()
    ffns = [layer.ffn for layer in [*model.encoder.layers, *model.decoder.layers]]
    names = {k for k in model.state_dict() if ".ffn." in k}
    monkeypatch.setattr(linear_module, "_kernels", lambda layer: ("packed",) * len(ROW_PROBES))
    pack_for_inference(model)
    now = [layer.ffn for layer in [*model.encoder.layers, *model.decoder.layers]]
    assert all(isinstance(f, PackedFeedForward) for f in now)
    assert all(n.linear1.weight is f.linear1.weight for n, f in zip(now, ffns, strict=True))
    assert {k for k in model.state_dict() if ".ffn." in k} == names  # saved under the same names
