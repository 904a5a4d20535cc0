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

The default batch is the paper's size (5.1: ~25,000 target tokens): 392 sentences of 64 tokens.
Compiled (`--compile`), each system's model and its loss are compiled as its trainer would run them
(aiayn's `compile: true`: the model, and the loss as fused plain operations, `aiayn.train.loss`).
`--cudagraphs` adds each aiayn variant compiled with `mode="reduce-overhead"`: the forward and
backward graphs replayed as CUDA graphs (one launch each, fixed shapes), which removes the time the
GPU waits on the CPU's kernel launches.
"aiayn chunked loss" computes the output projection and the loss together by chunks of tokens
(`aiayn.train.chunked_loss`: the logits never written whole). `--profile N` then profiles N steps
of each aiayn variant and prints where the GPU's time goes by kind of kernel (matrix products,
attention, the loss, other fused and elementwise kernels, the optimizer, copies) and the share of
the step the GPU sits idle (waiting on the CPU's launches).

    python benchmarks/gpu_train.py [--preset base] [--batch 392] [--len 64] [--compile] [--profile 5]
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
    """aiayn's Transformer, its forward pass and its trainer's loss (label_smoothed_nll, a sum)."""
    from aiayn.config import ModelConfig
    from aiayn.model.transformer import Transformer
    from aiayn.train.loss import label_smoothed_nll

    config = ModelConfig(
        vocab_size=p["vocab"], d_model=p["d_model"], n_layers=p["n_layers"], n_heads=p["n_heads"],
        d_ff=p["d_ff"], dropout=DROPOUT,
    )  # fmt: skip

    def criterion(logits, tgt_out):
        loss, _ = label_smoothed_nll(logits, tgt_out, SMOOTHING, PAD, overwrite_logits=True)
        return loss / tgt_out.ne(PAD).sum()

    return Transformer(config), (lambda forward, src, tgt_in: forward(src, tgt_in)), criterion


def build_marian(p: dict):
    """HF Marian (SDPA attention); PyTorch's fused smoothed cross entropy on float32 logits."""
    model, _ = build_hf(p)

    def head(forward, src, tgt_in):
        return forward(input_ids=src, decoder_input_ids=tgt_in, use_cache=False).logits

    return model, head, (lambda logits, tgt_out: smoothed_cross_entropy(logits.float(), tgt_out))


def build_aiayn_chunked(p: dict):
    """aiayn with the output projection and loss by chunks (aiayn.train.chunked_loss): the model
    returns the decoder's states, the (tokens, V) logits are never written whole. Its loss is
    never compiled (a Python loop over chunks)."""
    from aiayn.train.chunked_loss import chunked_output_nll

    model, _, _ = build_aiayn(p)

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, src, tgt_in):  # (batch, tgt_len, d_model)
            return self.model.decode(tgt_in, *self.model.encode(src))

    def criterion(h, tgt_out):
        with torch.autocast(h.device.type, dtype=torch.bfloat16):
            loss, _ = chunked_output_nll(h, model.output_weight, model.output_bias, tgt_out, SMOOTHING, PAD)
        return loss / tgt_out.ne(PAD).sum()

    criterion.eager = True
    return Hidden(model), (lambda forward, src, tgt_in: forward(src, tgt_in)), criterion


BUILDERS = {"aiayn": build_aiayn, "aiayn chunked loss": build_aiayn_chunked, "HF Marian (sdpa)": build_marian}


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


MODES = {None: "", "default": " compiled", "reduce-overhead": " compiled + CUDA graphs"}  # labels


def build(name: str, args, mode: str | None):
    """(model, step function) of one system; mode: None (eager) or torch.compile's mode for its
    model and loss."""
    torch.manual_seed(args.seed)
    model, head, criterion = BUILDERS[name](PRESETS[args.preset])
    model = model.to(args.device).train()
    forward = torch.compile(model, mode=mode) if mode else model
    criterion = torch.compile(criterion) if mode and not getattr(criterion, "eager", False) else criterion
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    graphs = mode == "reduce-overhead"

    def step(src, tgt_in, tgt_out) -> None:
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's graph outputs may be reused
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(src.device.type, dtype=torch.bfloat16):
            logits = head(forward, src, tgt_in)
        criterion(logits, tgt_out).backward()  # outside autocast: float32 (the chunked loss sets its own)
        optimizer.step()

    return model, step


def measure(name: str, args, data: list[tuple], mode: str | None, profile_to: list | None) -> dict:
    """Seconds per step (the mean over --steps) and peak GPU memory of one model; with
    `profile_to`, the per-kind table of --profile more steps is appended to it."""
    model, step = build(name, args, mode)
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for i in range(args.warmup):
        step(*data[i % len(data)])
    sync()
    warm = time.perf_counter() - started
    start = time.perf_counter()
    for i in range(args.steps):
        step(*data[i % len(data)])
    sync()
    seconds = (time.perf_counter() - start) / args.steps
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    if profile_to is not None:
        profile_to.append(profile_steps(step, data, args.profile, cuda))
    return dict(step_s=seconds, warmup_s=warm, peak_gib=peak)


# Kinds of kernel by a fragment of their lower-cased names, first match wins: cuBLAS's products
# (nvjet, gemm, cutlass, xmma; aten::mm on the CPU), the fused attention kernels, the loss
# (Inductor's fused kernels name the operations they hold: log_softmax; eager softmax, gather,
# scatter), the optimizer, dtype casts and layout copies (direct_copy: autocast's casts,
# transposes made contiguous; cat), host copies.
KINDS = [
    ("matrix products", ("nvjet", "gemm", "cutlass", "xmma", "sm90_", "::mm", "addmm", "bmm")),
    ("attention", ("flash", "fmha", "attention", "efficient")),
    ("loss", ("log_softmax", "softmax", "nll", "cross_entropy", "gather", "scatter")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("casts and layout copies", ("direct_copy", "catarray", "copy_kernel")),
    ("host copies, memset", ("memcpy", "memset")),
    ("other fused (Inductor)", ("triton",)),
    ("other elementwise", ("",)),
]
TOP = 8  # the most expensive kernels, by name


def profile_steps(step, data: list[tuple], n: int, cuda: bool) -> dict:
    """Device time per step by kind of kernel (CPU op time without a GPU), the most expensive
    kernels by name, and the step's wall time."""
    from torch.profiler import ProfilerActivity, profile

    activity = ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    with profile(activities=[activity]) as prof:
        start = time.perf_counter()
        for i in range(n):
            step(*data[i % len(data)])
        sync()
        wall = (time.perf_counter() - start) / n
    kinds, names = dict.fromkeys([k for k, _ in KINDS], 0.0), {}
    for e in prof.key_averages():
        if cuda != (e.device_type == torch.autograd.DeviceType.CUDA):
            continue
        sec = (e.self_device_time_total if cuda else e.self_cpu_time_total) / 1e6 / n
        kind = next(k for k, frags in KINDS if any(f in e.key.lower() for f in frags))
        kinds[kind] += sec
        names[e.key] = names.get(e.key, 0.0) + sec
    top = sorted(names.items(), key=lambda kv: -kv[1])[:TOP]
    return dict(wall_s=wall, kinds=kinds, top=top)


def print_profile(label: str, table: dict) -> None:
    busy = sum(table["kinds"].values())
    wall = table["wall_s"]
    print(f"  {label}: {1000 * wall:.1f} ms a step (profiled), GPU busy {1000 * busy:.1f} ms")
    for kind, sec in sorted(table["kinds"].items(), key=lambda kv: -kv[1]):
        print(f"    {kind:<28}{1000 * sec:>8.2f} ms {100 * sec / wall:>6.1f}%")
    idle = max(wall - busy, 0.0)
    print(f"    {'idle (waiting on the CPU)':<28}{1000 * idle:>8.2f} ms {100 * idle / wall:>6.1f}%")
    print("    the most expensive kernels:")
    for name, sec in table["top"]:
        print(f"    {1000 * sec:>8.2f} ms  {name[:90]}")
    print(flush=True)


def peak_tflops(args) -> float | None:
    if args.peak_tflops or not args.device.startswith("cuda"):
        return args.peak_tflops
    name = torch.cuda.get_device_name()
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in name), None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=PRESETS, default="base")
    p.add_argument("--batch", type=int, default=392, help="sentences per step (392 x 64: ~25k tokens)")
    p.add_argument("--len", type=int, default=64, help="source and target tokens per sentence")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compile", action="store_true", help="also time each model under torch.compile")
    p.add_argument("--cudagraphs", action="store_true", help="also aiayn compiled with CUDA graphs")
    p.add_argument("--profile", type=int, default=0, help="profile this many steps of each aiayn variant")
    p.add_argument("--systems", default=",".join(BUILDERS), help="which systems, comma-separated")
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
    rows, profiles = [], {}
    systems = [n for n in BUILDERS if n in args.systems.split(",")]
    modes = [None] + ["default"] * args.compile + ["reduce-overhead"] * args.cudagraphs
    for mode in modes:
        for name in systems:
            if mode == "reduce-overhead" and not name.startswith("aiayn"):
                continue
            label = name + MODES[mode]
            tables = [] if args.profile and name.startswith("aiayn") else None
            r = measure(name, args, data, mode, tables)
            gc.collect()  # the model and its optimizer state, before the next one is built
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
            mfu = flops / r["step_s"] / (peak * 1e12) if peak else float("nan")
            r.update(model=label, tok_s=tokens / r["step_s"], mfu=mfu)
            rows.append(r)
            print(
                f"{label:<28}{r['tok_s']:>10.0f}{1000 * r['step_s']:>10.1f}{100 * mfu:>7.1f}%"
                f"{r['peak_gib']:>10.1f}{r['warmup_s']:>11.1f}",
                flush=True,
            )
            if tables:  # printed at once: a run stopped at its time limit keeps what it measured
                profiles[label] = tables[0]
                print_profile(label, tables[0])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "args": vars(args), "rows": rows, "profiles": profiles}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
