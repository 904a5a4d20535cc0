"""Training throughput: aiayn vs torch.nn.Transformer vs HF MarianMTModel.

One training step = forward + label-smoothed cross entropy (epsilon 0.1) + backward + Adam step,
fp32 on the CPU, dropout 0.1 everywhere, on the same 64 x 32-token batches (random tokens, fixed
seed, no padding). The three models are the same network (section 3 of the paper): tied
source/target/output embeddings x sqrt(d_model), sinusoidal positions, post-norm, ReLU,
d256 / 3+3 layers / 4 heads / d_ff 1024 / 8k vocabulary ("tiny") or the paper's base with a 37k
vocabulary ("base"); the script checks that their trainable parameter counts agree.

Fairness:
- each model lives in its own worker process (spawned, same imports, `torch.set_num_threads`);
  the parent runs them in turn, `--chunk` steps at a time, for `--rounds` rounds, so a change in
  the machine's load hits every model alike; tok/s is the median over the rounds;
- peak memory is each worker's own high-water resident set size (`getrusage(RUSAGE_SELF)`), in a
  fresh process that imported the same libraries;
- aiayn times oneDNN against MKL on its first steps (before the timed ones) and keeps the faster,
  as its trainer does (`aiayn.runtime.kernels`);
- the memory allocator (`--allocator`): "shipped" (default) runs aiayn's worker under the one the
  `aiayn` command runs on (tcmalloc where installed: `aiayn.runtime.malloc`) and the peers under the C
  library's, as each runs out of the box; "same" gives every worker aiayn's; "system" none;
- every peer runs its best settings: SDPA attention (`attn_implementation="sdpa"` for HF, the
  is_causal fast path for nn.Transformer), no key-padding masks (there is no padding), the
  fused PyTorch loss `F.cross_entropy(label_smoothing=0.1)`, `use_cache=False` for HF, and the
  same Adam implementation (`--adam`) for all.

    python benchmarks/train_speed.py --preset tiny --rounds 5 --chunk 4 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time

from workers import stop_workers  # benchmarks/, the script's own directory

BATCH, SRC_LEN, TGT_LEN = 64, 32, 32
PRESETS = {
    "tiny": dict(d_model=256, n_layers=3, n_heads=4, d_ff=1024, vocab=8000),
    "base": dict(d_model=512, n_layers=6, n_heads=8, d_ff=2048, vocab=37000),
}
MODELS = ("aiayn", "torch", "hf")
LABELS = {"aiayn": "aiayn", "torch": "nn.Transformer", "hf": "HF Marian (sdpa)"}
PAD, BOS, SMOOTHING, DROPOUT = 0, 2, 0.1, 0.1
TARGET = 1.3  # aiayn at least 1.3x the faster peer's tokens/s


def smoothed_cross_entropy(logits, tgt_out):
    """The peers' loss: PyTorch's fused cross entropy with label smoothing, mean over tokens."""
    import torch.nn.functional as F

    flat = logits.view(-1, logits.size(-1))
    return F.cross_entropy(flat, tgt_out.view(-1), ignore_index=PAD, label_smoothing=SMOOTHING)


# -- the three models -----------------------------------------------------------------------------
def build_aiayn(p: dict):
    """aiayn's Transformer and the trainer's loss (aiayn.train.loss.label_smoothed_nll)."""
    from aiayn.config import ModelConfig
    from aiayn.model.transformer import Transformer
    from aiayn.runtime.linear import route_linears
    from aiayn.train.loss import label_smoothed_nll

    config = ModelConfig(
        vocab_size=p["vocab"], d_model=p["d_model"], n_layers=p["n_layers"], n_heads=p["n_heads"],
        d_ff=p["d_ff"], dropout=DROPOUT,
    )  # fmt: skip
    model = route_linears(Transformer(config))  # products through oneDNN, as aiayn's trainer does

    def loss_fn(src, tgt_in, tgt_out):
        loss, _ = label_smoothed_nll(model(src, tgt_in), tgt_out, SMOOTHING, PAD, overwrite_logits=True)
        return loss / tgt_out.ne(PAD).sum()

    return model, loss_fn


class TorchSeq2Seq:
    """nn.Transformer (no final norms: post-norm as the paper) with tied embeddings, positions, output."""

    @staticmethod
    def build(p: dict):
        import math

        import torch
        import torch.nn.functional as F
        from torch import nn

        d = p["d_model"]

        def layer(cls):
            return cls(d, p["n_heads"], p["d_ff"], DROPOUT, batch_first=True)

        core = nn.Transformer(
            d_model=d, nhead=p["n_heads"], batch_first=True,
            custom_encoder=nn.TransformerEncoder(
                layer(nn.TransformerEncoderLayer), p["n_layers"], enable_nested_tensor=False
            ),
            custom_decoder=nn.TransformerDecoder(layer(nn.TransformerDecoderLayer), p["n_layers"]),
        )  # fmt: skip
        embed = nn.Embedding(p["vocab"], d)
        nn.init.normal_(embed.weight, std=d**-0.5)
        pos = torch.arange(max(SRC_LEN, TGT_LEN), dtype=torch.float64)[:, None]
        inv = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)
        table = torch.zeros(pos.size(0), d, dtype=torch.float64)
        table[:, 0::2], table[:, 1::2] = torch.sin(pos * inv), torch.cos(pos * inv)
        table = table.float()
        model = nn.ModuleDict({"core": core, "embed": embed})
        scale = math.sqrt(d)

        def emb(tokens):
            x = embed(tokens) * scale + table[: tokens.size(1)]
            return F.dropout(x, DROPOUT, model.training)

        causal = nn.Transformer.generate_square_subsequent_mask(TGT_LEN)

        def loss_fn(src, tgt_in, tgt_out):
            h = core(emb(src), emb(tgt_in), tgt_mask=causal, tgt_is_causal=True)
            logits = F.linear(h, embed.weight)
            return smoothed_cross_entropy(logits, tgt_out)

        return model, loss_fn


def build_hf(p: dict):
    """HF MarianMTModel with SDPA attention, ReLU, post-norm, tied embeddings, sinusoidal positions."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=p["vocab"], d_model=p["d_model"], encoder_layers=p["n_layers"],
        decoder_layers=p["n_layers"], encoder_attention_heads=p["n_heads"],
        decoder_attention_heads=p["n_heads"], encoder_ffn_dim=p["d_ff"], decoder_ffn_dim=p["d_ff"],
        activation_function="relu", dropout=DROPOUT, attention_dropout=0.0, activation_dropout=0.0,
        scale_embedding=True, pad_token_id=PAD, decoder_start_token_id=BOS, eos_token_id=3,
        forced_eos_token_id=3, max_position_embeddings=512, use_cache=False,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
    )  # fmt: skip
    model = MarianMTModel._from_config(config, attn_implementation="sdpa")

    def loss_fn(src, tgt_in, tgt_out):
        logits = model(input_ids=src, decoder_input_ids=tgt_in, use_cache=False).logits
        return smoothed_cross_entropy(logits, tgt_out)

    return model, loss_fn


BUILDERS = {"aiayn": build_aiayn, "torch": TorchSeq2Seq.build, "hf": build_hf}


# -- one worker per model -------------------------------------------------------------------------
def make_batches(
    vocab: int, n: int, seed: int, batch: int = BATCH, src_len: int = SRC_LEN, tgt_len: int = TGT_LEN
):
    """n batches of (src, tgt_in, tgt_out), each (batch, len), random non-special tokens."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src = torch.randint(4, vocab, (batch, src_len), generator=g)
        tgt = torch.randint(4, vocab, (batch, tgt_len), generator=g)
        tgt_in = torch.cat([torch.full((batch, 1), BOS), tgt[:, :-1]], dim=1)
        out.append((src, tgt_in, tgt))
    return out


def make_optimizer(params, kind: str):
    import torch

    options = {"fused": dict(fused=True), "foreach": dict(foreach=True), "loop": dict(foreach=False)}[kind]
    return torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9, **options)


def rss_mib() -> float:
    """This process's peak resident set size so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def choose_backend(step) -> None:
    """aiayn.runtime.kernels' probe: alternate oneDNN and MKL over real steps, keep the faster."""
    from aiayn.runtime import kernels
    from aiayn.runtime.linear import linear_backend
    from aiayn.train import distributed

    choice = kernels.KernelChoice("auto", True, None, distributed.setup("cpu"))
    for _ in kernels.ORDER:
        choice.before_update()
        step()
        choice.after_update(True, BATCH * TGT_LEN)
    print(f"aiayn matrix products: {linear_backend.reason}", flush=True)


def worker(conn, name: str, preset: str, threads: int, adam: str, compile_model: bool, seed: int) -> None:
    """Build one model, then answer ("steps", n) with seconds taken and ("stats",) with numbers."""
    import torch
    import transformers  # noqa: F401  (every worker imports the same libraries: equal baselines)

    import aiayn.model.transformer  # noqa: F401
    from aiayn.apps.doctor import allocator

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    baseline = rss_mib()
    p = PRESETS[preset]
    model, loss_fn = BUILDERS[name](p)
    if compile_model:
        loss_fn = torch.compile(loss_fn)
    model.train()
    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = make_optimizer(params, adam)
    batches = make_batches(p["vocab"], 4, seed)
    done = 0
    while True:
        command = conn.recv()
        if command[0] == "stop":
            return
        if command[0] == "stats":
            n_params = sum(q.numel() for q in {id(q): q for q in params}.values())
            malloc = allocator()["name"]  # what this process runs on, preloaded by us or inherited
            conn.send({"params": n_params, "baseline_mib": baseline, "peak_mib": rss_mib(), "malloc": malloc})
            continue

        def step():
            nonlocal done
            src, tgt_in, tgt_out = batches[done % len(batches)]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(src, tgt_in, tgt_out)
            loss.backward()
            optimizer.step()
            done += 1
            return loss

        if name == "aiayn" and done == 0:
            choose_backend(step)  # as aiayn's trainer does on a fresh run's first updates
        start = time.perf_counter()
        for _ in range(command[1]):
            loss = step()
        conn.send((time.perf_counter() - start, loss.item()))


# -- the parent: interleaved rounds ---------------------------------------------------------------
def preload(name: str, allocator: str) -> str | None:
    """The library to preload into `name`'s worker (see --allocator), or None."""
    from aiayn.runtime import malloc

    if allocator == "system" or (allocator == "shipped" and name != "aiayn") or not malloc.wanted():
        return None
    return malloc.library()


def start(ctx, target, args: tuple, library: str | None):
    """Spawn a worker process, with `library` preloaded if given (a spawned child starts a fresh
    interpreter with the parent's environment as it is at `start`)."""
    proc = ctx.Process(target=target, args=args)
    before = os.environ.get("LD_PRELOAD")
    if library:
        os.environ["LD_PRELOAD"] = f"{library} {before or ''}".strip()
    try:
        proc.start()
    finally:
        if before is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = before
    return proc


def run(args) -> dict:
    ctx = mp.get_context("spawn")
    workers = {}
    for name in args.models:
        parent, child = ctx.Pipe()
        library = preload(name, args.allocator)
        proc = start(
            ctx, worker, (child, name, args.preset, args.threads, args.adam, args.compile, args.seed), library
        )
        child.close()  # the worker's end lives in the worker only: if it dies, recv() raises EOFError
        workers[name] = (proc, parent)
    try:
        for _, conn in workers.values():  # warm up one at a time too
            conn.send(("steps", args.warmup))
            conn.recv()
        times = {name: [] for name in workers}
        for _ in range(args.rounds):
            for name, (_, conn) in workers.items():  # one at a time: never two models on the cores
                conn.send(("steps", args.chunk))
                seconds, _ = conn.recv()
                times[name].append(seconds / args.chunk)
        stats = {}
        for name, (_, conn) in workers.items():
            conn.send(("stats",))
            stats[name] = conn.recv()
    finally:
        stop_workers(workers)
    tokens = BATCH * TGT_LEN
    results = {}
    for name in workers:
        step = statistics.median(times[name])
        results[name] = dict(stats[name], tok_s=tokens / step, step_s=step, per_round=times[name])
    return results


def report(args, results: dict) -> list[dict]:
    """Print the table; return rows for benchmarks/run_all.py."""
    counts = {r["params"] for r in results.values()}
    if len(counts) > 1:
        print(f"warning: parameter counts differ: { {n: r['params'] for n, r in results.items()} }")
    peers = [n for n in results if n != "aiayn"]
    best = max(peers, key=lambda n: results[n]["tok_s"]) if peers else None
    print(f"\ntraining, {args.preset}: {BATCH}x{TGT_LEN} target tokens/step, fp32, {args.threads} threads")
    print("malloc: " + ", ".join(f"{LABELS[name]} {r['malloc']}" for name, r in results.items()))
    print(f"{'model':<18}{'params':>12}{'tok/s':>10}{'ms/step':>10}{'peak RSS MiB':>14}")
    for name, r in results.items():
        print(
            f"{LABELS[name]:<18}{r['params']:>12,}{r['tok_s']:>10.0f}{1000 * r['step_s']:>10.1f}"
            f"{r['peak_mib']:>14.0f}"
        )
    rows = []
    if best and "aiayn" in results:
        a, b = results["aiayn"], results[best]
        ratio = a["tok_s"] / b["tok_s"]
        print(f"aiayn / {LABELS[best]}: {ratio:.2f}x tok/s, {a['peak_mib'] / b['peak_mib']:.2f}x peak RSS")
        rows.append(
            dict(
                measure=f"train {args.preset}, tok/s", aiayn=a["tok_s"], peer=LABELS[best],
                peer_value=b["tok_s"], ratio=ratio, target=TARGET, higher_is_better=True,
            )
        )  # fmt: skip
        rows.append(
            dict(
                measure=f"train {args.preset}, peak RSS MiB", aiayn=a["peak_mib"], peer=LABELS[best],
                peer_value=b["peak_mib"], ratio=a["peak_mib"] / b["peak_mib"], target=1.0,
                higher_is_better=False,
            )
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=PRESETS, default="tiny")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: aiayn,torch,hf")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--chunk", type=int, default=4, help="steps per model per round")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per model (sets --rounds)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--adam", choices=("fused", "foreach", "loop"), default="fused")
    parser.add_argument("--compile", action="store_true", help="torch.compile every model's step")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--allocator", choices=("shipped", "same", "system"), default="shipped",
        help="shipped: aiayn's worker under the aiayn command's allocator (tcmalloc where installed), "
        "the peers under the C library's; same: every worker under aiayn's; system: none preloaded",
    )  # fmt: skip
    parser.add_argument("--json", help="write the result rows here (for run_all.py)")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    if unknown := set(args.models) - set(MODELS):
        parser.error(f"unknown model(s): {', '.join(sorted(unknown))}")
    if args.steps:
        args.rounds = max(1, args.steps // args.chunk)
    results = run(args)
    rows = report(args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "results": results, "args": vars(args)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
