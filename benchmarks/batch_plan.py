"""The batch plan at WMT scale: one rank's token-bucketed batches of an epoch, as arrays
(`TokenBatchSampler.batches`, `BatchPlan`) against the same plan built element by element as lists
of Python ints (`tests/data/test_batching.py`'s `reference_batches`, the form it replaced), on the
same lengths in one run. Seconds (untraced) and peak traced memory (numpy's and Python's
allocations, tracemalloc, a second run) of the plans of two epochs on one rank of `--ranks`, and
whether both give the same batches.

Lengths: the Bible's train split's (prepared into --data on first use) tiled to --pairs, so the
width distribution is a real corpus's.

    python benchmarks/batch_plan.py [--pairs 4500000,36000000] [--ranks 8] [--reference-pairs 4500000]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from aiayn.data.batching import TokenBatchSampler
from aiayn.data.dataset import TokenDataset
from aiayn.data.prepare import prepare

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "data"))
from test_batching import reference_batches  # noqa: E402


def lengths(data: Path, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    if not (data / "meta.json").is_file():
        prepare(data, "bible-es-en", progress=False)
    train = TokenDataset(data, "train")
    reps = -(-pairs // len(train))
    return np.tile(train.src_lengths, reps)[:pairs], np.tile(train.tgt_lengths, reps)[:pairs]


def measure(build) -> tuple[float, float, object]:
    """(seconds, peak MB traced, result) of build(): timed untraced (tracing slows Python's own
    allocations many times), then run again under tracemalloc for its peak."""
    began = time.perf_counter()
    result = build()
    seconds = time.perf_counter() - began
    tracemalloc.start()
    build()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak, result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", default="4500000,36000000")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--reference-pairs", type=int, default=4_500_000, help="the list form up to this size")
    p.add_argument("--data", type=Path, default=Path("runs/bible-data"))
    args = p.parse_args()
    print(f"{'pairs':>12} {'form':<8} {'s, 2 epochs':>12} {'peak MB':>9}  same batches")
    for n in map(int, args.pairs.split(",")):
        src, tgt = lengths(args.data, n)
        sampler = TokenBatchSampler(src, tgt, args.max_tokens, seed=1, rank=1, world_size=args.ranks)
        seconds, peak, plans = measure(lambda: [len(sampler.batches(e)) for e in (0, 1)])  # noqa: B023
        print(f"{n:>12,} {'arrays':<8} {seconds:>12.2f} {peak:>9.0f}  {plans} batches", flush=True)
        if n <= args.reference_pairs:

            def lists():
                out = []
                for epoch in (0, 1):
                    everything = reference_batches(src, tgt, args.max_tokens, 1, epoch, 1 << 17)  # noqa: B023
                    per_rank = len(everything) // args.ranks
                    out.append(everything[1 : per_rank * args.ranks : args.ranks])
                return out

            seconds, peak, expected = measure(lists)
            same = all(sampler.batches(e) == expected[e] for e in (0, 1))
            print(f"{n:>12,} {'lists':<8} {seconds:>12.2f} {peak:>9.0f}  {same}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
