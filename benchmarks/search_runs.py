"""Search steps in runs (docs/performance.md, "Search steps in runs") against single steps: a trained
model translates the same sources with greedy search and beam search, one sentence a call and in
batches, with the stepper's native runs (`TransformerStepper.runs`: `NativeSearch.greedy` and
`.beam`, the whole search in one call until a sentence ends) and without them (the loops' single
steps over the same native step, then their bookkeeping in Python), the two alternating in one
process, best of `--rounds`. Both give the same outputs to the last bit
(tests/runtime/test_native_search.py); printed: tokens/s of each and their ratio (> 1: the runs are
faster), and how many outputs differ (0 expected).

    python benchmarks/search_runs.py MODEL_DIR SOURCES [--sentences 200] [--int8] [--shortlist]
        [--beams 1,4] [--batches 1,32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch

from aiayn.decode.stepper import TransformerStepper
from aiayn.decode.translator import Translator

RUNS = TransformerStepper.runs


def use_runs(on: bool) -> None:
    """The stepper's runs on, or off (the loops then take single steps)."""
    TransformerStepper.runs = RUNS if on else lambda self, rules: None


def translate(translator: Translator, texts: list[str], beam: int, batch: int, shortlist: bool):
    """-> (seconds, output tokens, the hypotheses)."""
    began, found = time.perf_counter(), []
    for i in range(0, len(texts), batch):
        found += translator.translate_batch(texts[i : i + batch], beam_size=beam, shortlist=shortlist)
    hyps = [[(h.tokens, h.score, h.log_prob) for h in hs] for hs in found]
    return time.perf_counter() - began, sum(len(hs[0][0]) for hs in hyps), hyps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path)
    p.add_argument("sources", type=Path, help="a text file, one source sentence a line")
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--int8", action="store_true")
    p.add_argument("--shortlist", action="store_true", help="the model directory's shortlist")
    p.add_argument("--beams", default="1,4")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    texts = args.sources.read_text(encoding="utf-8").splitlines()[: args.sentences]
    translator = Translator.load(args.model, device="cpu", int8=args.int8)
    kind = f"{'int8' if args.int8 else 'float32'}{' + shortlist' if args.shortlist else ''}"
    print(f"# {platform.machine()}, torch {torch.__version__}, {args.threads} threads; {args.model} "
          f"({kind}), {len(texts)} sentences of {args.sources}, best of {args.rounds} rounds")  # fmt: skip
    print("| search | sentences a call | single steps, tok/s | runs, tok/s | runs / single | differ |")
    print("|---|---:|---:|---:|---:|---:|")
    for beam in map(int, args.beams.split(",")):
        for batch in map(int, args.batches.split(",")):
            best, outputs = {True: 0.0, False: 0.0}, {}
            for on in (False, True, *[False, True] * args.rounds):  # the first pair warms up
                use_runs(on)
                seconds, tokens, outputs[on] = translate(translator, texts, beam, batch, args.shortlist)
                best[on] = max(best[on], tokens / seconds)
            use_runs(True)
            differ = sum(a != b for a, b in zip(outputs[True], outputs[False], strict=True))
            name = "greedy" if beam == 1 else f"beam {beam}"
            print(f"| {name} | {batch} | {best[False]:,.0f} | {best[True]:,.0f} | "
                  f"**{best[True] / best[False]:.2f}x** | {differ} of {len(texts)} |")  # fmt: skip


if __name__ == "__main__":
    main()
