"""What each decoding control costs: output tokens per second of a trained model on the
same test sentences with the control off and on, in one run, and the BLEU of reference words used
as terminology constraints.

Rows: plain beam 4 (the paper's search); a target prefix (each reference's first word); lexical
constraints (dynamic beam allocation) at beams 4 and 10: each reference's longest word, or the
longest reference word the free output lacks (terminology the model got wrong); sampling (top-p 0.9, one
sample: against greedy, the same number of rows); word alignments (`align=True`: one more
teacher-forced pass); an ensemble of the model with itself (two steppers). Tokens per second
counts output tokens (pieces, EOS not counted) over the wall time of `Translator.translate`.

    python benchmarks/decode_controls.py runs/quickstart/model runs/quickstart/data [--sentences 300]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import sacrebleu
import torch

from aiayn.config import SamplingConfig
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator

PUNCTUATION = ".,;:!?()’'\""


def timed(translator: Translator, texts: list[str], **options) -> tuple[list[str], float]:
    """(outputs, output tokens per second)."""
    began = time.perf_counter()
    results = translator.translate_batch(texts, **options)
    seconds = time.perf_counter() - began
    tokens = sum(len(r[0].tokens) for r in results)
    return [r[0].text for r in results], tokens / seconds


def missing_words(outputs: list[str], refs: list[str]) -> list[list[str] | None]:
    """Per sentence the longest reference word (punctuation stripped) that the free output lacks,
    the terminology case: a term the translator got wrong; None where it has every word."""
    out = []
    for hyp, ref in zip(outputs, refs, strict=True):
        have = {w.strip(PUNCTUATION) for w in hyp.split()}
        words = [w.strip(PUNCTUATION) for w in ref.split()]
        lacking = [w for w in words if w and w not in have]
        out.append([max(lacking, key=len)] if lacking else None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("data_dir")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    raw = Path(args.data_dir) / "raw"
    src = raw.joinpath("test.src").read_text(encoding="utf-8").splitlines()[: args.sentences]
    ref = raw.joinpath("test.tgt").read_text(encoding="utf-8").splitlines()[: args.sentences]
    translator = Translator.load(args.model_dir, "cpu")
    pair = Translator.load([args.model_dir, args.model_dir], "cpu")
    longest = [[max(r.split(), key=len).strip(PUNCTUATION)] for r in ref]
    missed = missing_words(translate_texts(translator, src), ref)
    runs = {
        "beam 4": (translator, {}),
        "beam 4 + prefix (first reference word)": (translator, {"prefix": [r.split()[0] for r in ref]}),
        "beam 4 + constraints (longest reference word)": (translator, {"constraints": longest}),
        "beam 10 + constraints (longest reference word)": (
            translator,
            {"constraints": longest, "beam_size": 10},
        ),
        "beam 4 + constraints (a reference word missed)": (translator, {"constraints": missed}),
        "beam 10 + constraints (a reference word missed)": (
            translator,
            {"constraints": missed, "beam_size": 10},
        ),
        "beam 10": (translator, {"beam_size": 10}),
        "beam 4 + alignments": (translator, {"align": True}),
        "beam 4, ensemble of 2": (pair, {}),
        "greedy": (translator, {"beam_size": 1}),
        "sampling, top-p 0.9": (translator, {"beam_size": 1, "sample": SamplingConfig(top_p=0.9, seed=1)}),
    }
    print(f"{platform.processor() or platform.machine()}, {args.threads} threads, {len(src)} test sentences")
    print(f"{'run':48s} {'tok/s':>8s} {'vs its base':>12s} {'BLEU':>6s}")
    timed(translator, src[:16])  # warm-up: kernels chosen, caches allocated
    base = {}
    for name, (t, options) in runs.items():
        outputs, rate = timed(t, src, **options)
        key = "greedy" if options.get("beam_size") == 1 else "beam 4"
        base.setdefault(key, rate)
        bleu = sacrebleu.corpus_bleu(outputs, [ref]).score
        print(f"{name:48s} {rate:8.0f} {rate / base[key]:11.2f}x {bleu:6.2f}")


if __name__ == "__main__":
    main()
