"""The output projection and loss by chunks (aiayn.train.chunked_loss) against the whole-logits
loss (`label_smoothed_nll` of `F.linear`) in float64: the same sums and the same gradients."""

import pytest
import torch
import torch.nn.functional as F

from aiayn.train.chunked_loss import chunked_output_nll
from aiayn.train.loss import label_smoothed_nll

PAD = 0


def problem(seed: int, tokens: int = 37, d: int = 16, vocab: int = 53, bias: bool = True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(tokens, d, generator=g, dtype=torch.float64)
    w = torch.randn(vocab, d, generator=g, dtype=torch.float64) / d**0.5
    b = torch.randn(vocab, generator=g, dtype=torch.float64) if bias else None
    target = torch.randint(1, vocab, (tokens,), generator=g)
    target[[3, 10, 36]] = PAD
    return h, w, b, target


@pytest.mark.parametrize(("chunk", "bias", "epsilon"), [(5, True, 0.1), (37, False, 0.1), (100, True, 0.0)])
def test_equals_the_whole_logits_loss_in_value_and_gradient(chunk, bias, epsilon):
    h, w, b, target = problem(1, bias=bias)
    leaves = [t.clone().requires_grad_(True) for t in (h, w) + ((b,) if bias else ())]
    ref = [t.detach().clone().requires_grad_(True) for t in leaves]
    own_bias, ref_bias = (leaves[2], ref[2]) if bias else (None, None)
    loss, nll = chunked_output_nll(leaves[0], leaves[1], own_bias, target, epsilon, PAD, chunk)
    logits = F.linear(ref[0], ref[1], ref_bias)
    ref_loss, ref_nll = label_smoothed_nll(logits, target, epsilon, PAD)
    # label_smoothed_nll sums in float32; the chunks keep float64 products and float32 sums
    torch.testing.assert_close(loss.double(), ref_loss.double(), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(nll.double(), ref_nll.double(), rtol=1e-6, atol=1e-5)
    (2.5 * loss).backward()
    (2.5 * ref_loss).backward()
    for got, want in zip(leaves, ref, strict=True):
        torch.testing.assert_close(got.grad.double(), want.grad.double(), rtol=1e-5, atol=1e-6)
    assert torch.all(leaves[0].grad[[3, 10, 36]] == 0)  # padding gives no gradient
    assert not nll.requires_grad  # for logging


def test_bf16_products_under_autocast_stay_close():
    h, w, b, target = problem(2, tokens=64, d=32, vocab=200)
    h, w, b = h.float().requires_grad_(True), w.float().requires_grad_(True), b.float().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = chunked_output_nll(h, w, b, target, 0.1, PAD, chunk=16)
    loss.backward()
    ref_h, ref_w = h.detach().double().requires_grad_(True), w.detach().double().requires_grad_(True)
    want, _ = label_smoothed_nll(F.linear(ref_h, ref_w, b.detach().double()), target, 0.1, PAD)
    want.backward()
    assert loss.dtype == torch.float32 and h.grad.dtype == w.grad.dtype == torch.float32
    assert loss.item() == pytest.approx(want.item(), rel=1e-2)  # bf16 keeps 8 bits of mantissa
    cosine = F.cosine_similarity
    assert cosine(h.grad.flatten().double(), ref_h.grad.flatten(), dim=0) > 0.999
    assert cosine(w.grad.flatten().double(), ref_w.grad.flatten(), dim=0) > 0.999
