"""Training throughput and model FLOPs utilisation on a GPU: aiayn against HF MarianMTModel, bf16.

The same network as `train_speed.py` (tied embeddings x sqrt(d_model), sinusoidal positions,
post-norm, ReLU, dropout 0.1, label smoothing 0.1; the paper's base by default) and the same
random batches, on one GPU under bf16 autocast (aiayn's trainer's `precision: auto`), with fused
Adam for both. Each model trains `--warmup` steps, then `--steps` timed ones (CUDA synchronised at
both ends); eager first, then under `torch.compile` when `--compile` is given. The models run one
after the other in this process, each freed before the next is built.

Model FLOPs utilisation (MFU) counts the matrix products a step must do, forward and backward
(3x the forward): 2 x (input features x output features) per token for every projection, the
encoder's over source tokens, the decoder's and the output layer's over target tokens, the
cross-attention keys/values over source tokens, plus 2 x 2 x length x d_model per token and layer
for the attention scores and their weighted sum (half of it under the causal mask), divided by the
GPU's dense bf16 peak (`PEAK_TFLOPS`, or `--peak-tflops`).

    python benchmarks/gpu_train.py [--preset base] [--batch 128] [--len 64] [--compile] [--json F]
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import torch

from train_speed import DROPOUT, PAD, PRESETS, SMOOTHING, build_hf, make_batches, smoothed_cross_entropy

# Dense bf16 TFLOP/s by the first name fragment that the GPU's name holds (vendor data sheets);
# other GPUs: --peak-tflops.
PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100 NVL": 835.0, "H100": 989.4, "H200": 989.4, "A100": 312.0,
               "L40S": 362.0, "L40": 181.0, "L4": 121.0}  # fmt: skip


def build_aiayn(p: dict):
    """aiayn's Transformer and its trainer's loss (label_smoothed_nll over the whole batch)."""
    from aiayn.config import ModelConfig
    from aiayn.model.transformer import Transformer
    from aiayn.train.loss import label_smoothed_nll

    config = ModelConfig(
        vocab_size=p["vocab"], d_model=p["d_model"], n_layers=p["n_layers"], n_heads=p["n_heads"],
        d_ff=p["d_ff"], dropout=DROPOUT,
    )  # fmt: skip
    model = Transformer(config)

    def loss_fn(forward, src, tgt_in, tgt_out):
        with torch.autocast(src.device.type, dtype=torch.bfloat16):
            logits = forward(src, tgt_in)
        loss, _ = label_smoothed_nll(logits, tgt_out, SMOOTHING, PAD, overwrite_logits=True)
        return loss / tgt_out.ne(PAD).sum()

    return model, loss_fn


def build_marian(p: dict):
    """HF Marian (SDPA attention) under the same autocast; PyTorch's fused smoothed cross entropy."""
    model, _ = build_hf(p)

    def loss_fn(forward, src, tgt_in, tgt_out):
        with torch.autocast(src.device.type, dtype=torch.bfloat16):
            logits = forward(input_ids=src, decoder_input_ids=tgt_in, use_cache=False).logits
        return smoothed_cross_entropy(logits.float(), tgt_out)

    return model, loss_fn


BUILDERS = {"aiayn": build_aiayn, "HF Marian (sdpa)": build_marian}


def step_flops(p: dict, batch: int, src_len: int, tgt_len: int) -> float:
    """Matrix-product FLOPs of one training step: 2 per multiply-add, backward twice the forward."""
    d, ff, n, v = p["d_model"], p["d_ff"], p["n_layers"], p["vocab"]
    src, tgt = batch * src_len, batch * tgt_len  # tokens
    encoder = n * src * (4 * d * d + 2 * d * ff + 2 * src_len * d)  # projections, FFN, attention
    decoder = n * (
        tgt * (4 * d * d + 2 * d * ff)  # self-attention projections, feed-forward
        + tgt * 2 * d * d  # cross-attention Q and output
        + src * 2 * d * d  # cross-attention K, V (of the encoder's output)
        + tgt * 2 * tgt_len * d / 2  # causal self-attention: half the score matrix
        + tgt * 2 * src_len * d
    )
    output = tgt * d * v
    return 3 * 2 * (encoder + decoder + output)


def batches(vocab: int, n: int, batch: int, length: int, device: str, seed: int) -> list[tuple]:
    """train_speed.py's random batches, `length` tokens on both sides, on `device`."""
    made = make_batches(vocab, n, seed, batch, length, length)
    return [tuple(t.to(device) for t in b) for b in made]


def measure(name: str, args, data: list[tuple], compiled: bool) -> dict:
    """Seconds per step (the mean over --steps) and peak GPU memory of one model."""
    torch.manual_seed(args.seed)
    model, loss_fn = BUILDERS[name](PRESETS[args.preset])
    model = model.to(args.device).train()
    forward = torch.compile(model) if compiled else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step(i: int) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(forward, *data[i % len(data)]).backward()
        optimizer.step()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for i in range(args.warmup):
        step(i)
    sync()
    warm = time.perf_counter() - started
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    sync()
    seconds = (time.perf_counter() - start) / args.steps
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    return dict(step_s=seconds, warmup_s=warm, peak_gib=peak)


def peak_tflops(args) -> float | None:
    if args.peak_tflops or not args.device.startswith("cuda"):
        return args.peak_tflops
    name = torch.cuda.get_device_name()
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in name), None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=PRESETS, default="base")
    p.add_argument("--batch", type=int, default=128, help="sentences per step")
    p.add_argument("--len", type=int, default=64, help="source and target tokens per sentence")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compile", action="store_true", help="also time each model under torch.compile")
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (else from its name)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cuda", help="cuda (cpu only to try the script)")
    p.add_argument("--json", help="write the result rows here")
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_train.py: no CUDA GPU here (--device cpu only tries the script)")
    if args.device.startswith("cuda"):
        torch.cuda.set_device(torch.device(args.device).index or 0)  # synchronise and count on it
    torch.backends.cuda.matmul.allow_tf32 = True
    preset, peak = PRESETS[args.preset], peak_tflops(args)
    data = batches(preset["vocab"], 4, args.batch, args.len, args.device, args.seed)
    flops = step_flops(preset, args.batch, args.len, args.len)
    tokens = args.batch * args.len
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    print(f"{device}, torch {torch.__version__}, {args.preset}, bf16 autocast")
    print(f"{args.batch} x {args.len} target tokens/step, {flops / 1e12:.2f} TFLOP/step, peak {peak} TFLOP/s")
    print(f"{'model':<28}{'tok/s':>10}{'ms/step':>10}{'MFU':>8}{'peak GiB':>10}{'warm-up s':>11}")
    rows = []
    for compiled in (False, True) if args.compile else (False,):
        for name in BUILDERS:
            r = measure(name, args, data, compiled)
            gc.collect()  # the model and its optimizer state, before the next one is built
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
            label = name + (" compiled" if compiled else "")
            mfu = flops / r["step_s"] / (peak * 1e12) if peak else float("nan")
            r.update(model=label, tok_s=tokens / r["step_s"], mfu=mfu)
            rows.append(r)
            print(
                f"{label:<28}{r['tok_s']:>10.0f}{1000 * r['step_s']:>10.1f}{100 * mfu:>7.1f}%"
                f"{r['peak_gib']:>10.1f}{r['warmup_s']:>11.1f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
