"""How much of a long source a model translates, by its length against the model's longest training
source (config.json's `longest_source`): test verses joined without sentence ends
into texts of about 0.75, 1, 1.5, 2 and 3 times that many tokens, translated greedily whole and with
aiayn's split at twice it; printed: output words per input word.

    python benchmarks/long_sources.py runs/quickstart/model runs/quickstart/data [--texts 12]
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

from aiayn.decode.bundle import ModelBundle
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator


def joined(
    plain: list[str], translator: Translator, tokens: float, n: int, start: int
) -> tuple[list[str], int]:
    """n texts of at least `tokens` source tokens each, from plain[start:]; -> (texts, next start)."""
    texts, i = [], start
    while len(texts) < n and i < len(plain):
        parts: list[str] = []
        while i < len(plain) and len(translator.encode([" ".join(parts)])[0]) < tokens:
            parts.append(plain[i])
            i += 1
        texts.append(" ".join(parts))
    return texts, i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--texts", type=int, default=12)
    args = parser.parse_args()
    split = Translator.load(args.model, device="cpu")
    longest = split.info["longest_source"]
    info = {k: v for k, v in split.info.items() if k != "longest_source"}
    whole = Translator(ModelBundle([split.bundle.model], split.tokenizer, info))
    lines = Path(args.data, "raw", "test.src").read_text(encoding="utf-8").splitlines()
    plain = [re.sub(r"[.;:!?]", "", line) for line in lines if line.strip()]  # nothing to split at
    words = lambda texts, outs: sum(len(o.split()) for o in outs) / sum(len(t.split()) for t in texts)  # noqa: E731
    start = 0
    for factor in (0.75, 1.0, 1.5, 2.0, 3.0):
        texts, start = joined(plain, split, factor * longest, args.texts, start)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the split's warning for each text
            outs_whole, outs_split = (
                translate_texts(whole, texts, beam_size=1),
                translate_texts(split, texts, beam_size=1),
            )
        ratios = f"whole {words(texts, outs_whole):.2f}, split {words(texts, outs_split):.2f}"
        print(f"{factor}x {longest} tokens: {ratios}")


if __name__ == "__main__":
    main()
