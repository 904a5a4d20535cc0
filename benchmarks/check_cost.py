"""What speculative decoding's check costs against one decoding step: the teacher's native
pass over m new positions of one sentence (`NativeDecoder.extend`, k = m - 1 proposals checked)
against its single native step, at decode.py's model sizes (random weights: the speed does not
depend on them), float32 on the CPU as `Translator.load` prepares a teacher with a draft loaded
(the row-invariant panel products, `linear.row_invariant`).

Speculative greedy decoding pays where a pass yields more tokens than it costs steps: with t tokens
per pass (1 to k + 1; BENCHMARKS.md has the acceptance of the trained pair) and a draft whose k
proposals cost d steps of the teacher, its speed is t / (pass + d) times greedy search's, before
the Python around both. Printed: the step and each pass in milliseconds (best of `--repeats` rounds
of `--calls` calls, rounds alternating step and passes) and each pass in steps.

    python benchmarks/check_cost.py [--size tiny|base] [--prefix 30] [--positions 2,3,4,5,7]
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

import decode  # benchmarks/, the script's own directory
from aiayn.decode.ragged import RaggedDecoder
from aiayn.runtime.linear import pack_for_inference, row_invariant
from aiayn.runtime.native_step import attach_native_decoder


def teacher(size: str):
    """decode.py's aiayn model of `size`, prepared as a speculative teacher (native, row-invariant)."""
    _, model = decode.build_models(size, "cpu")
    pack_for_inference(model)
    row_invariant(model.decoder, model.output_layer)
    status = attach_native_decoder(model)
    if status != "native":
        raise SystemExit(f"the native step is not available here: {status}")
    return model.eval()


def timer(model, src: torch.Tensor, prefix: int, m: int, calls: int):
    """A function timing `calls` passes of m positions after `prefix` held ones (m = 1: a greedy step's
    work, through the same call)."""
    decoder = RaggedDecoder(model, src, prefix + m + 1)
    decoder.keep(torch.tensor([prefix]))
    tokens = torch.randint(4, model.config.vocab_size - 1, (1, m))

    def run() -> float:
        began = time.perf_counter()
        for _ in range(calls):
            decoder.extend(tokens)  # the lengths stay: every call writes and reads the same positions
        return (time.perf_counter() - began) / calls * 1e3

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=tuple(decode.SIZES), default="tiny")
    p.add_argument("--prefix", type=int, default=30, help="positions each pass reads before its own")
    p.add_argument("--positions", default="2,3,4,5,7", help="positions per pass (k + 1) to time")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = teacher(args.size)
    src = decode.sources(1, 30, model.config.vocab_size, "cpu")
    widths = [1, *map(int, args.positions.split(","))]
    with torch.inference_mode():
        runs = {m: timer(model, src, args.prefix, m, args.calls) for m in widths}
        best = {m: float("inf") for m in widths}
        for _ in range(args.repeats + 1):  # the first round warms up
            for m in widths:
                best[m] = min(best[m], runs[m]())
    print(f"# {platform.machine()}, torch {torch.__version__}, {args.threads} threads, {args.size} model, "
          f"one sentence, {args.prefix} positions held")  # fmt: skip
    print("| positions per pass | ms | in steps |\n|---:|---:|---:|")
    for m in widths:
        print(f"| {m}{' (a greedy step)' if m == 1 else ''} | {best[m]:.3f} | {best[m] / best[1]:.2f} |")


if __name__ == "__main__":
    main()
