"""Label-smoothed cross entropy against an independent float64 computation and PyTorch's kernel."""

import pytest
import torch
import torch.nn.functional as F

from aiayn.train.loss import LabelSmoothedCrossEntropy, label_smoothed_nll

PAD = 0


def reference(logits, target, epsilon):
    """Build the smoothed distribution explicitly: 1 - eps + eps/V on the reference, eps/V elsewhere."""
    logits, vocab = logits.double().reshape(-1, logits.size(-1)), logits.size(-1)
    target = target.reshape(-1)
    logp = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(logp, epsilon / vocab)
    q[torch.arange(len(target)), target] += 1.0 - epsilon
    real = target != PAD
    loss = -(q * logp).sum(-1)[real].sum()
    nll = -logp[torch.arange(len(target)), target][real].sum()
    return loss, nll


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_matches_float64_reference(epsilon):
    logits = torch.randn(3, 7, 50) * 3
    target = torch.randint(1, 50, (3, 7))
    target[0, 5:] = PAD
    target[2, 2:] = PAD
    loss, nll = label_smoothed_nll(logits, target, epsilon, PAD)
    ref_loss, ref_nll = reference(logits, target, epsilon)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(nll.double(), ref_nll, rtol=1e-6, atol=1e-5)


def test_equals_torch_label_smoothing_over_v_classes():
    logits = torch.randn(40, 30)
    target = torch.randint(0, 30, (40,))
    loss, _ = label_smoothed_nll(logits, target, 0.1, PAD)
    expected = F.cross_entropy(logits, target, ignore_index=PAD, label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-4)


def test_padding_contributes_nothing_and_gradient_matches():
    logits = torch.randn(2, 5, 20, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 3]])
    loss, _ = LabelSmoothedCrossEntropy(0.1, PAD)(logits, target)
    loss.backward()
    assert torch.all(logits.grad[0, 3:] == 0)
    ref = logits.detach().clone().requires_grad_(True)
    reference(ref, target, 0.1)[0].backward()
    torch.testing.assert_close(logits.grad, ref.grad)


def test_bf16_logits_are_summed_in_fp32():
    logits = torch.randn(4, 9, 64)
    target = torch.randint(1, 64, (4, 9))
    loss16, _ = label_smoothed_nll(logits.bfloat16(), target, 0.1, PAD)
    ref, _ = reference(logits.bfloat16().float(), target, 0.1)
    assert loss16.dtype == torch.float32
    torch.testing.assert_close(loss16.double(), ref, rtol=1e-5, atol=1e-3)


def test_the_backward_pass_runs_once_and_says_so_when_replayed():
    """The gradient overwrites the saved log-probabilities: a replay must fail, not return junk."""
    logits = torch.randn(6, 20, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 20, (6,))
    loss, nll = label_smoothed_nll(logits, target, 0.1, PAD)
    (loss + 2 * nll).backward(retain_graph=True)
    ref = logits.detach().clone().requires_grad_(True)
    ref_loss, ref_nll = reference(ref, target, 0.1)
    (ref_loss + 2 * ref_nll).backward()
    torch.testing.assert_close(logits.grad, ref.grad)  # both outputs' gradients, in one pass
    with pytest.raises(RuntimeError, match="its backward runs once"):
        loss.backward()


def test_overwriting_the_logits_gives_the_same_loss_and_gradients():
    """The trainers' `overwrite_logits=True`: log-probabilities written over a model's logits."""
    from aiayn.config import ModelConfig
    from aiayn.model.transformer import Transformer
    from aiayn.runtime.linear import route_linears

    torch.manual_seed(0)  # routed as the trainer does: the logits are a view made in oneDNN's Function
    config = ModelConfig(vocab_size=40, d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0)
    model = route_linears(Transformer(config))
    src, tgt_in, tgt_out = (torch.randint(3, 40, (8, 6)) for _ in range(3))  # rows >= MIN_ROWS
    tgt_out[1, 4:] = PAD
    runs = []
    for overwrite in (False, True):
        model.zero_grad()
        logits = model(src, tgt_in)
        expected = torch.log_softmax(logits.detach(), -1)
        loss, nll = label_smoothed_nll(logits, tgt_out, 0.1, PAD, overwrite_logits=overwrite)
        written = torch.equal(logits.detach().reshape(expected.shape), expected)  # log-probs in place
        loss.backward()
        runs.append((loss.item(), nll.item(), [p.grad.clone() for p in model.parameters()], written))
    (loss0, nll0, grads0, written0), (loss1, nll1, grads1, written1) = runs
    assert (loss1, nll1) == (loss0, nll0)
    for a, b in zip(grads0, grads1, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert written1 and not written0


def test_the_plain_form_matches_float64_in_value_and_gradient():
    """`smoothed_nll_terms`, what torch.compile traces, against the explicit smoothed distribution."""
    from aiayn.train.loss import smoothed_nll_terms

    logits = torch.randn(21, 40, dtype=torch.float64) * 3
    target = torch.randint(1, 40, (21,))
    target[[2, 9, 20]] = PAD
    got, ref = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    loss, nll = smoothed_nll_terms(got, target, 0.1, PAD)
    ref_loss, ref_nll = reference(ref, target, 0.1)
    torch.testing.assert_close((loss, nll), (ref_loss, ref_nll), rtol=1e-12, atol=1e-12)
    (loss + 2 * nll).backward()
    (ref_loss + 2 * ref_nll).backward()
    torch.testing.assert_close(got.grad, ref.grad, rtol=1e-12, atol=1e-12)
    assert torch.all(got.grad[[2, 9, 20]] == 0)


@pytest.mark.slow
def test_compiled_it_is_the_plain_form(monkeypatch):
    """Under torch.compile (the trainer's `compile: true`) the loss is traced as plain operations:
    the same value and gradient as the eager Function, with no graph break."""
    import aiayn.train.loss as loss_module

    traced = []
    plain = loss_module.smoothed_nll_terms
    monkeypatch.setattr(loss_module, "smoothed_nll_terms", lambda *a: traced.append(1) or plain(*a))
    logits = torch.randn(3, 7, 50) * 3
    target = torch.randint(1, 50, (3, 7))
    target[1, 4:] = PAD
    compiled = torch.compile(label_smoothed_nll, fullgraph=True)
    got, want = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    loss, nll = compiled(got, target, 0.1, PAD)
    assert traced  # the compiler traced the plain form, not the Function
    ref_loss, ref_nll = label_smoothed_nll(want, target, 0.1, PAD)
    torch.testing.assert_close((loss, nll), (ref_loss, ref_nll), rtol=1e-5, atol=1e-4)
    (loss + nll).backward()
    (ref_loss + ref_nll).backward()
    torch.testing.assert_close(got.grad, want.grad, rtol=1e-5, atol=1e-6)
