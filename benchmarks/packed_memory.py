"""What one row's kernel costs in memory (`aiayn.runtime.linear.ONE_ROW`).

A one-row product always takes one kernel, untimed, whose rows' bits do not depend on the row count
(the native panels; in earlier versions oneDNN's packed weight), so that speculative decoding's
multi-position pass gives exactly the single steps' logits; every float linear layer then keeps a
copy of its weight in that layout beside the float one, where otherwise only the layers whose timed
row classes chose it would. This loads a model directory for translation three times, each in its
own process: as shipped (one row on the panels), one row packed, and one row timed like the other
row classes (ONE_ROW = None), then translates the same sentences one at a time (the one-row path)
and in one batch, greedy. Reported: the weight copies kept (packed and panels, MB), the resident
memory after loading and the peak, and the words per second of each.

    python benchmarks/packed_memory.py MODEL_DIR DATA_DIR [--sentences 100] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import json, resource, sys, time
import torch
import aiayn.runtime.linear as linear
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
model, source, n, threads, one_row = sys.argv[1:6]
torch.set_num_threads(int(threads))
linear.ONE_ROW = None if one_row == "timed" else one_row
texts = open(source, encoding="utf-8").read().splitlines()[: int(n)]
t = Translator.load(model, device="cpu")
packed = sum(c.numel() * 4 for m in t.bundle.model.modules() if isinstance(m, linear.PackedLinear)
             for c in (m.packed, m.panels) if c is not None)
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096
loaded = rss()
start = time.perf_counter()
single = [translate_texts(t, [s], beam_size=1)[0] for s in texts]
one = time.perf_counter() - start
start = time.perf_counter()
translate_texts(t, texts, beam_size=1)
whole = time.perf_counter() - start
words = sum(len(s.split()) for s in single)
print(json.dumps({"packed_mb": packed / 2**20, "loaded_mb": loaded / 2**20,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "one_words_s": words / one, "batch_words_s": words / whole}))
"""


def run(model: Path, source: Path, n: int, threads: int, one_row: str) -> dict:
    argv = [sys.executable, "-c", WORKER, str(model), str(source), str(n), str(threads), one_row]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("data", type=Path, help="its data directory: raw/test.src is translated")
    p.add_argument("--sentences", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    source = args.data / "raw" / "test.src"
    choices = (
        ("one row panels (shipped)", "panels"),
        ("one row packed", "packed"),
        ("one row timed", "timed"),
    )
    rows = {label: run(args.model, source, args.sentences, args.threads, value) for label, value in choices}
    print(f"{args.model}: {args.sentences} sentences, greedy, {args.threads} threads")
    print(f"{'':<26}{'copies MB':>10}{'loaded MB':>11}{'peak MB':>9}{'1-row words/s':>15}{'batch':>9}")
    for label, r in rows.items():
        print(f"{label:<26}{r['packed_mb']:>10.1f}{r['loaded_mb']:>11.1f}{r['peak_mb']:>9.1f}"
              f"{r['one_words_s']:>15.1f}{r['batch_words_s']:>9.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
