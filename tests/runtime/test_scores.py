"""A search step's scores by the native kernels (aiayn.runtime.scores) equal PyTorch's.

References: log-normalisers against a float64 `logsumexp`; the beam's top candidates against
`topk` of the float32 sum (the same rounding: equal values); beam search through the kernels
against beam search through log_softmax and PyTorch's top-k (the same tokens). Skipped only where
no C++ compiler is installed or AIAYN_NATIVE=0 (as tests/runtime/test_native_step.py).
"""

import math
import os

import pytest
import torch

import aiayn.decode.stepper as stepper_module
from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.generate import decode_batch
from aiayn.model.transformer import Transformer
from aiayn.runtime import native_build, scores
from aiayn.runtime.blockwise import row_topk
from aiayn.runtime.linear import pack_for_inference
from aiayn.runtime.native_step import attach_native_decoder

pytestmark = pytest.mark.skipif(
    native_build._compiler() is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)


def _native_lse(x):
    assert native_build.load(), native_build.reason()
    return torch.ops.aiayn.row_log_normalizers(x)


@pytest.mark.parametrize("width", [1, 7, 8, 63, 64, 65, 8000, 8003])
def test_log_normalizers_equal_float64_logsumexp(width):
    g = torch.Generator().manual_seed(width)
    x = torch.randn(37, width, generator=g) * 6
    x[3] -= 1000.0  # far from zero: the maximum is taken out first
    x[5, : width // 2] = -math.inf  # masked entries add nothing
    got = _native_lse(x)
    want = torch.logsumexp(x.double(), dim=-1)
    assert torch.allclose(got.double(), want, rtol=4e-7, atol=2e-6)
    assert torch.allclose(got, torch.logsumexp(x, dim=-1), rtol=4e-7, atol=2e-6)


def test_log_normalizers_are_nan_where_a_row_is_not_finite():
    x = torch.zeros(6, 70)
    x[0, 66] = math.nan  # in the tail
    x[1, 3] = math.nan  # in a whole block
    x[2] = -math.inf
    x[3, 10] = math.inf
    x[4, :64] = -math.inf  # nothing finite before the NaN
    x[4, 9] = math.nan
    x[5, :64] = math.nan  # a block of NaN first
    assert torch.isnan(_native_lse(x)).all()


def test_exp_is_exact_to_float32_rounding_far_below_the_maximum():
    # exp(x - max) for x - max down to -80 (and the clamp below): the sum of two entries is exact
    for gap in (0.0, 0.3466, 1.0, 5.5, 20.0, 60.0, 80.0, 86.9):
        x = torch.tensor([[0.0, -gap]])
        want = math.log1p(math.exp(-gap))
        assert abs(float(_native_lse(x)[0]) - want) <= 2.5e-7 * max(1.0, want), gap


def _beam_top_reference(s, off, c):
    n, k, v = s.shape
    return (s + off[:, :, None]).reshape(n, k * v).topk(c, dim=-1)


@pytest.mark.parametrize("shape", [(5, 4, 8000), (3, 1, 30), (2, 5, 129), (6, 4, 61)])
def test_beam_top_equals_topk_of_the_sum(shape):
    n, k, v = shape
    g = torch.Generator().manual_seed(sum(shape))
    s = torch.randn(n, k, v, generator=g) * 5
    off = torch.randn(n, k, generator=g) * 10
    off[0, 1:] = -math.inf  # the first step: one live hypothesis
    s[1, 0, :7] = -math.inf  # banned ids
    c = min(2 * k, k * v)
    want_v, want_i = _beam_top_reference(s, off, c)
    got_v, got_i = torch.ops.aiayn.beam_top(s, off, c)
    assert torch.equal(got_v, want_v)
    assert torch.equal(got_i, want_i)  # values are distinct here: the same indices
    fallback_v, _ = row_topk(s.clone().add_(off[:, :, None]).reshape(n, k * v), c)
    assert torch.equal(got_v, fallback_v)


def test_beam_top_fills_missing_candidates_with_minus_inf():
    s = torch.full((2, 3, 5), -math.inf)
    s[0, 1, 2] = 1.0  # one candidate in sentence 0, none in sentence 1
    off = torch.zeros(2, 3)
    values, index = torch.ops.aiayn.beam_top(s, off, 4)
    assert values[0, 0] == 1.0 and index[0, 0] == 1 * 5 + 2
    assert torch.isinf(values[0, 1:]).all() and torch.isinf(values[1]).all()
    assert ((index >= 0) & (index < 15)).all()


def test_a_row_with_a_nan_normaliser_ranks_first_as_topk_ranks_nan():
    s = torch.zeros(2, 2, 70)
    s[:, :, 5] = 1.0
    off = torch.tensor([[0.0, math.nan], [0.0, 0.0]])  # sentence 0's row 1: NaN logits upstream
    values, index = torch.ops.aiayn.beam_top(s, off, 3)
    assert math.isnan(values[0, 0]) and 70 <= index[0, 0] < 140  # then the finite ones
    assert values[0, 1:].tolist() == [1.0, 0.0] and index[0, 1] == 5
    assert values[1].tolist() == [1.0, 1.0, 0.0]
    assert torch.isnan(_beam_top_reference(s, off, 3)[0][0, 0])  # topk: the same first place


def test_beam_top_rejects_a_bad_count():
    with pytest.raises(RuntimeError, match="is not in"):
        torch.ops.aiayn.beam_top(torch.zeros(1, 2, 3), torch.zeros(1, 2), 7)


def test_without_the_library_the_same_values(monkeypatch):
    g = torch.Generator().manual_seed(1)
    s, off = torch.randn(3, 4, 300, generator=g), torch.randn(3, 4, generator=g)
    with torch.inference_mode():
        native = scores.beam_top(s.clone(), off, 8), scores.log_normalizers(s.view(12, 300))
        monkeypatch.setattr(scores, "_native", lambda *tensors: False)
        python = scores.beam_top(s.clone(), off, 8), scores.log_normalizers(s.view(12, 300))
    assert torch.equal(native[0][0], python[0][0]) and torch.equal(native[0][1], python[0][1])
    assert torch.allclose(native[1], python[1], rtol=4e-7, atol=2e-6)


def test_beam_search_through_the_kernels_finds_what_log_softmax_finds(monkeypatch):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=300, d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0)
    model = Transformer(config).eval()
    pack_for_inference(model)
    attach_native_decoder(model)
    src = torch.randint(4, 300, (6, 9))
    src[2, 5:] = config.pad_id
    options = DecodeConfig(beam_size=4, n_best=4, max_len_a=0.0, max_len_b=12)
    kernels = decode_batch(model, src, options)
    # log_softmax and PyTorch's top-k, one step at a time in Python (no native runs):
    stepper = stepper_module.TransformerStepper
    monkeypatch.setattr(stepper, "logits_and_normalizers", lambda self, tokens: (self.step(tokens), None))
    monkeypatch.setattr(stepper, "runs", lambda self, rules: None)
    monkeypatch.setattr(scores, "_native", lambda *tensors: False)
    python = decode_batch(model, src, options)
    for a, b in zip(kernels, python, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for x, y in zip(a, b, strict=True):
            assert math.isclose(x.score, y.score, rel_tol=1e-5, abs_tol=1e-5)
