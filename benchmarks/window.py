"""Restricted self-attention (Table 1's fourth row, `aiayn.model.window`): does its cost grow linearly?

1. One encoder layer (d_model 256, d_ff 1024, 4 heads, batch 1), forward + backward, at n = 512,
   1024, ...: the best of `--repeats` times and the peak memory above what the process held before
   the first pass (its peak resident size, each measurement in a fresh process), for full attention
   (PyTorch's fused kernel, aiayn's default) and windows r = 64 and 128; then the fitted exponent
   of each curve (the least-squares slope of log cost against log n: 2 is quadratic, 1 linear),
   over all n and over n >= 2048, where the fixed costs of a pass fade.
2. Incremental decoding of one sentence (the tiny preset's decoder, greedy steps, Python's step for
   both, since the native step declines windowed models): ms per token around output lengths 256 ...
   `--decode-len`, with the full cache against the ring buffer of r + 1 positions, and the bytes the
   self-attention caches hold at the end.

    python benchmarks/window.py [--max-n 8192] [--full-max-n 8192] [--decode-len 4096] [--repeats 3]

Run it alone (under the CPU lock here): two torch jobs at once on two cores time nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

import torch

from aiayn.config import ModelConfig

WINDOWS = (None, 64, 128)  # None: full attention
LAYER = dict(d_model=256, d_ff=1024, n_heads=4, n_layers=1, dropout=0.0)


def layer_child(n: int, window: int | None, repeats: int) -> dict[str, float]:
    """In a fresh process: the peak memory of the first forward + backward, then the best time."""
    from aiayn.model.layers import EncoderLayer

    torch.manual_seed(0)
    layer = EncoderLayer(ModelConfig(attention_window=window, **LAYER))
    x = torch.randn(1, n, LAYER["d_model"], requires_grad=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    times = []
    for _ in range(repeats + 1):
        began = time.perf_counter()
        layer(x)[0].sum().backward()
        times.append(time.perf_counter() - began)
        layer.zero_grad(set_to_none=True)
        x.grad = None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return {"ms": min(times[1:]) * 1000, "mib": peak / 1024}


def measure_layer(n: int, window: int | None, repeats: int) -> dict[str, float]:
    argv = [sys.executable, __file__, "--child", str(n), str(window or 0), str(repeats)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of log y against log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def layer_table(args: argparse.Namespace) -> None:
    print(f"one encoder layer {LAYER}, batch 1, forward + backward, torch {torch.__version__}")
    print(f"{'n':>6} | " + " | ".join(f"{name(w):>22}" for w in WINDOWS))
    curves: dict[int | None, list[tuple[int, float, float]]] = {w: [] for w in WINDOWS}
    n = 512
    while n <= args.max_n:
        cells = []
        for w in WINDOWS:
            if w is None and n > args.full_max_n:
                cells.append(f"{'-':>22}")
                continue
            m = measure_layer(n, w, args.repeats)
            curves[w].append((n, m["ms"], m["mib"]))
            cells.append(f"{m['ms']:10.1f} ms {m['mib']:6.0f} MiB")
        print(f"{n:>6} | " + " | ".join(cells), flush=True)
        n *= 2
    for w, points in curves.items():
        for long in (points, [p for p in points if p[0] >= 2048]):  # all, and where fixed costs fade
            if len(long) > 1:
                ns = [p[0] for p in long]
                print(
                    f"exponent {name(w)}: time {slope(ns, [p[1] for p in long]):.2f}, "
                    f"memory {slope(ns, [p[2] for p in long]):.2f} (n = {ns[0]}..{ns[-1]})"
                )


def name(window: int | None) -> str:
    return "full" if window is None else f"r={window}"


def decode_row(window: int | None, length: int, marks: list[int]) -> tuple[list[float], int]:
    """ms per token over the 64 steps before each mark, and the caches' bytes at the end."""
    from aiayn.model.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny", attention_window=window, dropout=0.0)).eval()
    with torch.inference_mode():
        memory, mask = model.encode(torch.randint(4, 100, (1, 30)))
        state = model.start_decoding(memory, mask, length)
        tokens, stamps = torch.tensor([model.config.start_id]), [time.perf_counter()]
        for _ in range(length):
            tokens = model.decode_step(tokens, state).argmax(-1)
            stamps.append(time.perf_counter())
    per_token = [(stamps[m] - stamps[m - 64]) / 64 * 1000 for m in marks]
    return per_token, sum(c.k.nbytes + c.v.nbytes for c in state.self_kv)


def decode_table(args: argparse.Namespace) -> None:
    marks = [m for m in (256, 1024, 2048, 4096, 8192, 16384) if m <= args.decode_len]
    print(f"\ndecoding one sentence, tiny preset, greedy, Python step; ms/token over 64 steps up to {marks}")
    for w in WINDOWS:
        per_token, cache = decode_row(w, args.decode_len, marks)
        cells = "  ".join(f"t={m}: {ms:.2f}" for m, ms in zip(marks, per_token, strict=True))
        print(f"{name(w):>6}: {cells}   self-attention cache {cache / 2**20:.2f} MiB", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        n, window, repeats = map(int, sys.argv[2:5])
        print(json.dumps(layer_child(n, window or None, repeats)))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-n", type=int, default=8192, help="the longest input of the layer table")
    p.add_argument("--full-max-n", type=int, default=8192, help="the longest input full attention is given")
    p.add_argument("--decode-len", type=int, default=4096, help="tokens decoded (0: no decoding table)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    layer_table(args)
    if args.decode_len:
        decode_table(args)


if __name__ == "__main__":
    main()
