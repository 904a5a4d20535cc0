"""Where aiayn's training step spends its time: steps back to back, then `torch.profiler`'s table.

The model, batches, loss and Adam of `train_speed.py` (aiayn, or with `--model` one of its peers, in
one process), aiayn's matrix-product backend chosen as its trainer does; prints the milliseconds of
`--steps` timed steps, the ops that took the most time over `--profiled` more, and the share of the
matrix products (`mm`, `addmm`, `bmm`, oneDNN's linear): the part of a step that the same BLAS
makes equal between aiayn and a peer, so what a faster step can still gain. Not a comparison with
a peer (that is `train_speed.py`): the profile that says what to change next.

    python benchmarks/profile_train_step.py --preset tiny --threads 2 [--model hf]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import train_speed  # noqa: E402

PRODUCTS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "mkldnn::_linear_pointwise"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=train_speed.PRESETS, default="tiny")
    p.add_argument("--model", choices=train_speed.MODELS, default="aiayn")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--profiled", type=int, default=2)
    p.add_argument("--rows", type=int, default=25, help="ops in the profile's table")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    preset = train_speed.PRESETS[args.preset]
    model, loss_fn = train_speed.BUILDERS[args.model](preset)
    model.train()
    optimizer = train_speed.make_optimizer([q for q in model.parameters() if q.requires_grad], "fused")
    batches = train_speed.make_batches(preset["vocab"], 4, 0)
    done = 0

    def step() -> None:
        nonlocal done
        src, tgt_in, tgt_out = batches[done % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        loss_fn(src, tgt_in, tgt_out).backward()
        optimizer.step()
        done += 1

    if args.model == "aiayn":
        train_speed.choose_backend(step)
    step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(1000 * (time.perf_counter() - start))
    print(f"{args.preset}, {args.threads} threads: ms per step " + " ".join(f"{t:.0f}" for t in times))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.profiled):
            step()
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    total = sum(e.self_cpu_time_total for e in events)
    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    ms = 1e3 * args.profiled  # profiler microseconds -> milliseconds a step
    print(f"{args.model}: matrix products {products / total:.1%} of the profiled time "
          f"({products / ms:.0f} of {total / ms:.0f} ms a step)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
