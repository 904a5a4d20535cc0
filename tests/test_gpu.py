"""The GPU paths against the CPU and float64 references: attention (PyTorch's fused kernels on the
GPU), a training step in float32 and under bf16 autocast, and decoding. Skipped where there is no
CUDA GPU (CI); `benchmarks/gpu_session.sh` runs them on a lent one."""

import math

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.decode.translator import Translator
from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.transformer import Transformer
from aiayn.train.loss import label_smoothed_nll
from toy_translation import toy_pairs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _no_tf32():
    """Full float32 products on the GPU, so float32 results compare tightly with the CPU's."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def reference_attention(q, k, v, mask):
    """Eq. 1 in float64 on the CPU; mask (..., q_len, k_len) True where a query may look."""
    q, k, v = (t.double().cpu() for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return scores.masked_fill(~mask.cpu(), float("-inf")).softmax(-1) @ v


PRECISIONS = [(torch.float32, 1e-5), (torch.bfloat16, 2e-2), (torch.float16, 3e-3)]  # (dtype, max error)


@pytest.mark.parametrize(("dtype", "tol"), PRECISIONS)
def test_fused_attention_on_the_gpu_matches_float64(dtype, tol):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 4, 37, 64, generator=g) for _ in range(3))  # (batch, heads, len, d_k)
    causal = torch.ones(37, 37, dtype=torch.bool).tril()
    padded = torch.ones(3, 1, 1, 37, dtype=torch.bool)
    padded[1, ..., 30:] = False
    cases = [(dict(is_causal=True), causal.expand(3, 4, 37, 37)), (dict(mask=padded.cuda()), padded)]
    for kwargs, mask in cases:
        out, _ = scaled_dot_product_attention(*(t.to("cuda", dtype) for t in (q, k, v)), **kwargs)
        want = reference_attention(q, k, v, mask.expand(3, 4, 37, 37))
        assert out.dtype == dtype
        assert (out.double().cpu() - want).abs().max().item() < tol


def test_the_layers_attention_on_the_gpu_never_asks_cudnn(monkeypatch):
    # cuDNN's attention builds a plan per new shape (GPU_ATTENTION): the layers' calls run without it
    import aiayn.model.attention as attention

    calls, fused = [], attention.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(torch.backends.cuda.cudnn_sdp_enabled())
        return fused(*args, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    model = small_model().cuda().eval()
    src = torch.randint(4, 120, (3, 9), device="cuda")
    model(src, src)
    assert len(calls) == 6 and not any(calls)  # per layer: encoder self; decoder self and cross


def small_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=120, d_model=64, d_ff=128, n_heads=4, n_layers=2, dropout=0.0)
    return Transformer(config)


def loss_and_grads(model: Transformer, batch: tuple, device: str, bf16: bool = False):
    model = model.to(device)
    model.zero_grad()
    src, tgt_in, tgt_out = (t.to(device) for t in batch)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        logits = model(src, tgt_in)
    loss, _ = label_smoothed_nll(logits, tgt_out, 0.1, model.config.pad_id)
    loss.backward()
    grads = {n: p.grad.detach().double().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return loss.item(), grads


def test_a_training_step_on_the_gpu_matches_the_cpu():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 120, (6, 11), generator=g)
    tgt = torch.randint(4, 120, (6, 9), generator=g)
    src[2, 7:] = tgt[4, 5:] = 0  # padding: masks and ignored targets on both devices
    tgt_in = torch.cat([torch.zeros(6, 1, dtype=torch.long), tgt[:, :-1]], dim=1)
    batch = (src, tgt_in, tgt)
    cpu_loss, cpu_grads = loss_and_grads(small_model(), batch, "cpu")
    gpu_loss, gpu_grads = loss_and_grads(small_model(), batch, "cuda")
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-5)
    assert cpu_grads.keys() == gpu_grads.keys()
    for name, grad in cpu_grads.items():  # float32 sums in another order: 1e-5 of the gradient's size
        assert (gpu_grads[name] - grad).abs().max() <= 1e-5 * grad.abs().max(), name
    bf16_loss, bf16_grads = loss_and_grads(small_model(), batch, "cuda", bf16=True)
    assert bf16_loss == pytest.approx(cpu_loss, rel=2e-2)  # bf16 keeps 8 bits of mantissa
    cosine = torch.nn.functional.cosine_similarity
    flat = lambda grads: torch.cat([grads[n].flatten() for n in sorted(grads)])  # noqa: E731
    assert cosine(flat(bf16_grads), flat(cpu_grads), dim=0).item() > 0.99


def test_decoding_on_the_gpu_matches_the_cpu(toy_model_dir):
    texts = [s for s, _ in toy_pairs(40, seed=5)]
    cpu, gpu = Translator.load(toy_model_dir, device="cpu"), Translator.load(toy_model_dir, device="cuda")
    assert gpu.device.type == "cuda"
    for beam in (1, 4):
        want = cpu.translate(texts, beam_size=beam, return_scores=True)
        got = gpu.translate(texts, beam_size=beam, return_scores=True)
        assert [h[0].text for h in got] == [h[0].text for h in want]
        scores = torch.tensor([[h[0].score for h in got], [h[0].score for h in want]])
        assert torch.allclose(scores[0], scores[1], atol=1e-4)
