"""The search's row maximum and top-k by blocks (aiayn.runtime.blockwise) against PyTorch's `max`
and `topk`, on the shapes of a decoding step: best of `--repeats` loops of `--loops` calls.

    python benchmarks/blockwise.py [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from aiayn.runtime.blockwise import row_max, row_topk

SHAPES = [(32, 8000, "tiny greedy"), (32, 32000, "tiny beam 4"), (32, 58101, "OPUS-MT vocab")]


def micros(fn, loops: int, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--loops", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    capability = torch.backends.cpu.get_cpu_capability()
    print(f"{args.threads} thread(s), torch {torch.__version__}, {capability}; microseconds a call")
    print(f"{'rows x width':<26}{'max':>7}{'row_max':>9}{'':>7}{'topk 8':>8}{'row_topk':>10}")
    for rows, width, what in SHAPES:
        x = torch.randn(rows, width, generator=torch.Generator().manual_seed(0))
        assert torch.equal(row_max(x)[1], x.max(dim=-1).indices)
        assert torch.equal(row_topk(x, 8)[0], x.topk(8, dim=-1).values)
        calls = (
            lambda x=x: x.max(dim=-1), lambda x=x: row_max(x), lambda x=x: x.topk(8, dim=-1),
            lambda x=x: row_topk(x, 8),
        )  # fmt: skip
        t = [micros(f, args.loops, args.repeats) for f in calls]
        label = f"{rows} x {width:,} ({what})"
        ratios = f"{t[0] / t[1]:>6.1f}x{t[2]:>8.0f}{t[3]:>10.0f}{t[2] / t[3]:>6.1f}x"
        print(f"{label:<26}{t[0]:>7.0f}{t[1]:>9.0f}{ratios}")


if __name__ == "__main__":
    main()
