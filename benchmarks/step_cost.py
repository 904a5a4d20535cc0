"""What one decoding step costs, aiayn against CTranslate2: each system translates the same batch
(`decode.py`'s models and sources) to 2 and to `--new-tokens` output tokens; the difference divided
by the extra steps is the cost of a step, the encoder and the set-up cancelled out.

`--size mini` is a model of the tiny preset's depth (3 + 3 layers, 4 heads) with d_model 16, d_ff 32
and 64 words: its kernels cost next to nothing, so its step is the fixed cost of a step (the calls
into PyTorch or CTranslate2, the Python around them, the search's bookkeeping). Each system runs in
its own process, one after the other (as in decode.py); float32, CPU.

    python benchmarks/step_cost.py [--size tiny|mini|base] [--threads 1] [--new-tokens 50] [--python-step]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import decode  # benchmarks/, the script's own directory

decode.SIZES["mini"] = dict(vocab_size=64, d_model=16, layers=3, heads=4, ffn=32)
SYSTEMS = {"aiayn": "aiayn", "ct2": "CTranslate2"}


def best_ms(translate, beam: int, repeats: int) -> float:
    """The best of `repeats` timed runs after two warm-up runs, in milliseconds."""
    for _ in range(2):
        translate(beam)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        translate(beam)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def measure(system: str, args: argparse.Namespace) -> dict:
    """In this process: {beam: (ms for 2 tokens, ms for new_tokens)} for one system."""
    torch.set_num_threads(args.threads)
    hf, model = decode.build_models(args.size, "cpu")
    src = decode.sources(args.sentences, args.src_len, model.config.vocab_size, "cpu")
    ct2_dir = decode.convert_for_ctranslate2(hf, Path(tempfile.mkdtemp())) if system == "ct2" else None
    times: dict[int, list[float]] = {}
    for beam in (1, 4):
        for new in (2, args.new_tokens):
            options = argparse.Namespace(
                vocab_size=model.config.vocab_size,
                device="cpu",
                threads=args.threads,
                alpha=0.6,
                new_tokens=new,
                native=args.native,
            )
            if system == "ct2":
                translate = decode.ct2_system(src, "float32", options, ct2_dir)
            else:
                translate = decode.aiayn_system(model, src, options, int8=False)
            times.setdefault(beam, []).append(best_ms(translate, beam, args.repeats))
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=["mini", "tiny", "base"], default="tiny")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--src-len", type=int, default=30)
    p.add_argument("--new-tokens", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--python-step",
        dest="native",
        action="store_false",
        help="aiayn with the Python decoding step, not the native one (aiayn.runtime.native_step)",
    )
    p.add_argument("--system", choices=SYSTEMS, help=argparse.SUPPRESS)  # a worker's own system
    args = p.parse_args()
    if args.system:
        print(json.dumps(measure(args.system, args)))
        return 0
    print(f"{args.size}, {args.threads} thread(s), {args.sentences} sentences x {args.src_len} source tokens")
    steps, per_step = args.new_tokens - 2, {}
    for system, name in SYSTEMS.items():
        run = subprocess.run(
            [sys.executable, *sys.argv, "--system", system], stdout=subprocess.PIPE, text=True, check=True
        )
        for beam, (short, long) in json.loads(run.stdout.splitlines()[-1]).items():
            per_step[system, beam] = step = (long - short) / steps
            print(f"{name:12s} beam {beam}: 2 tokens {short:7.1f} ms, {args.new_tokens} tokens "
                  f"{long:7.1f} ms, a step {step:.3f} ms")  # fmt: skip
    for beam in ("1", "4"):
        ratio = per_step["aiayn", beam] / per_step["ct2", beam]
        print(f"beam {beam}: aiayn's step / CTranslate2's = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
