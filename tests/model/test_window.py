"""Self-attention restricted to a window (Table 1's fourth row) against float64 full attention under
a band mask, and that the blocked computation never builds an n x n tensor."""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from aiayn.config import ModelConfig
from aiayn.errors import AiaynError
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.window import MIN_BLOCK, window_attention


def banded_float64(q, k, v, r, causal, key_mask=None):
    """Full attention (Eq. 1) in float64 with every key outside the band masked, written out:
    query i sees key j when |i - j| <= r (j <= i too when causal) and j is a real token.
    Returns the output and which queries see any key at all."""
    q, k, v = q.double(), k.double(), v.double()
    n = q.size(2)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    allowed = (i - j).abs() <= r
    if causal:
        allowed &= j <= i
    if key_mask is not None:
        allowed = allowed & key_mask  # (batch, 1, n, n)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~allowed, -math.inf)
    seen = allowed.any(-1)  # (batch | 1, 1, n)
    weights = torch.softmax(scores.masked_fill(~seen[..., None], 0.0), dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), seen.expand(q.size(0), q.size(1), n)


CASES = [  # (n, r): odd lengths, r = 1, r over n, a window wider than a block, one block exactly
    (1, 1),
    (7, 1),
    (9, 2),
    (33, 3),
    (65, 5),
    (101, 40),
    (64, MIN_BLOCK),
    (6, 10),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, r", CASES)
def test_window_attention_equals_float64_banded_full_attention(n, r, causal):
    g = torch.Generator().manual_seed(n * 100 + r)
    q, k = torch.randn(2, 3, n, 8, generator=g), torch.randn(2, 3, n, 8, generator=g)
    v = torch.randn(2, 3, n, 6, generator=g)
    key_mask = torch.ones(2, 1, 1, n, dtype=torch.bool)
    key_mask[1, ..., (n + 1) // 2 :] = False  # the second row padded on the right
    for mask in (None, key_mask):
        out = window_attention(q, k, v, r, causal, mask)
        ref, seen = banded_float64(q, k, v, r, causal, mask)
        assert out.shape == (2, 3, n, 6) and out.dtype == torch.float32
        torch.testing.assert_close(out.double()[seen], ref[seen], rtol=1e-5, atol=1e-6)
        assert torch.isfinite(out).all()  # padded queries far from any real key too


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_those_of_banded_full_attention(causal):
    n, r = 70, 3
    q, k, v = (torch.randn(1, 2, n, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    key_mask = torch.ones(1, 1, 1, n, dtype=torch.bool)
    key_mask[..., 60:] = False
    out = window_attention(q, k, v, r, causal, key_mask)
    ref, seen = banded_float64(q, k, v, r, causal, key_mask)
    upstream = torch.randn(1, 2, n, 8, dtype=torch.float64) * seen[..., None]
    grads = torch.autograd.grad((out * upstream).sum(), (q, k, v))
    ref_grads = torch.autograd.grad((ref * upstream).sum(), (q, k, v))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_with_a_window_equals_its_dense_band(causal):
    """The module's blocked path against its own dense path (the one attention maps take)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, window=3).eval()
    x = torch.randn(2, 50, 16)
    mask = (
        None if causal else torch.arange(50).expand(2, 1, 1, 50) < torch.tensor([50, 31])[:, None, None, None]
    )
    blocked, _ = mha(x, mask=mask, is_causal=causal)
    dense, weights = mha(x, mask=mask, is_causal=causal, need_weights=True)
    real = slice(None) if causal else slice(0, 31)
    torch.testing.assert_close(blocked[:, real], dense[:, real], rtol=1e-5, atol=1e-6)
    i, j = torch.meshgrid(torch.arange(50), torch.arange(50), indexing="ij")
    outside = ((i - j).abs() > 3) | ((j > i) if causal else False)
    assert weights[:, :, outside].abs().max() == 0


def test_cross_attention_stays_full():
    assert MultiHeadAttention(16, 4, cross=True, window=3).window is None


class LargestTensor(TorchDispatchMode):
    """Records the most elements of any tensor an ATen operation returns."""

    def __init__(self):
        super().__init__()
        self.most = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.most = max(self.most, t.numel())
        return out


@pytest.mark.parametrize("causal", [False, True])
def test_no_tensor_of_the_forward_and_backward_passes_is_n_by_n(causal):
    n, r, heads = 600, 4, 2
    mha = MultiHeadAttention(16, heads, window=r)
    x = torch.randn(1, n, 16, requires_grad=True)
    with LargestTensor() as probe:
        out, _ = mha(x, is_causal=causal)
        out.sum().backward()
    assert probe.most < n * n / 4  # the scores are heads * n * (block + 2r) = 2 * 608 * 40 elements
    assert probe.most >= heads * n * (MIN_BLOCK + r)  # and the probe saw them


def test_old_configs_load_with_full_attention_and_bad_windows_are_refused():
    old = ModelConfig().to_dict()
    del old["attention_window"]
    assert ModelConfig.from_dict(old).attention_window is None
    assert ModelConfig(attention_window=8).attention_window == 8
    for bad in (0, -3):
        with pytest.raises(AiaynError, match="attention_window must be positive or null"):
            ModelConfig(attention_window=bad)
