"""The GPU paths against the CPU and float64 references: attention (PyTorch's fused kernels on the
GPU), a training step in float32 and under bf16 autocast, decoding, fp16 training with loss
scaling, the compiled trainer and DDP over nccl (one rank). Skipped where there is no
CUDA GPU (CI); `benchmarks/gpu_session.sh` runs them on a lent one."""

import json
import math

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.decode.translator import Translator
from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.transformer import Transformer
from aiayn.train.loss import label_smoothed_nll
from aiayn.train.trainer import train
from toy_translation import tiny_config, toy_pairs

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
        want = cpu.translate_batch(texts, beam_size=beam)
        got = gpu.translate_batch(texts, beam_size=beam)
        assert [h[0].text for h in got] == [h[0].text for h in want]
        scores = torch.tensor([[h[0].score for h in got], [h[0].score for h in want]])
        assert torch.allclose(scores[0], scores[1], atol=1e-4)


def train_losses(run) -> list[float]:
    rows = (json.loads(line) for line in (run / "metrics.jsonl").open())
    return [r["loss"] for r in rows if r["kind"] == "train"]


def test_fp16_with_loss_scaling_trains_and_resumes(data_dir, tmp_path):
    # fp16 (GPUs without bf16): a GradScaler scales the loss; its state is saved and restored
    config = tiny_config(precision="fp16", warmup_steps=4, log_every=1)
    for steps in (8, 16):
        config = config.replace(train=config.train.replace(max_steps=steps))
        result = train(data_dir, tmp_path / "run", config, progress=False, device="cuda")
    assert (result.start_step, result.step) == (8, 16)
    state = torch.load(result.checkpoint / "trainer_state.pt", weights_only=True)
    scaler = state["scaler"]  # its count of steps since the last change went on across the resume
    assert scaler["_growth_tracker"] > 8 or scaler["scale"] != 2.0**16
    losses = train_losses(tmp_path / "run")
    assert len(losses) == 16 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-4:]) < sum(losses[:4])  # it learns


def test_the_compiled_trainer_matches_eager_on_the_gpu(data_dir, tmp_path):
    # `compile: true`: the model compiled, the loss traced as plain operations (no dropout: the
    # compiled graph draws its masks differently). bf16 products in another order: 2% of the loss.
    config = tiny_config(max_steps=4, log_every=1)
    config = config.replace(model=config.model.replace(dropout=0.0))
    eager = train(data_dir, tmp_path / "eager", config, progress=False, device="cuda")
    compiled = config.replace(train=config.train.replace(compile=True))
    train(data_dir, tmp_path / "compiled", compiled, progress=False, device="cuda")
    assert eager.step == 4
    want, got = train_losses(tmp_path / "eager"), train_losses(tmp_path / "compiled")
    assert len(got) == len(want) == 4
    assert got == pytest.approx(want, rel=2e-2)


def test_ddp_over_nccl_on_the_gpu_equals_the_plain_step(tmp_path):
    # One rank (one GPU here): the nccl process group, aiayn's all_reduce and DDP's gradient
    # reduction run; each equals the single-process result.
    import torch.distributed as dist

    from aiayn.train.distributed import DistEnv, all_reduce

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    try:
        assert dist.get_backend() == "nccl"
        env = DistEnv(rank=0, world_size=2, device=torch.device("cuda"))  # distributed: reduces
        total = all_reduce(torch.tensor([3.0, 4.0], device="cuda"), env)
        assert total.tolist() == [3.0, 4.0]
        batch = (torch.randint(4, 120, (6, 11)), torch.randint(4, 120, (6, 9)), torch.randint(4, 120, (6, 9)))
        _, plain = loss_and_grads(small_model(), batch, "cuda")
        ddp = torch.nn.parallel.DistributedDataParallel(small_model().cuda(), device_ids=[0])
        src, tgt_in, tgt_out = (t.cuda() for t in batch)
        label_smoothed_nll(ddp(src, tgt_in), tgt_out, 0.1, 0)[0].backward()
        for name, p in ddp.module.named_parameters():
            if p.grad is not None:
                torch.testing.assert_close(p.grad.double().cpu(), plain[name], rtol=1e-5, atol=1e-7)
    finally:
        dist.destroy_process_group()
