"""Speculative greedy decoding against the teacher's own greedy search: output tokens per
second for one sentence at a time (interactive latency) and for batches of 32, the share of draft
tokens the teacher accepted, and whether every output is the teacher's, token for token.

The speed baseline is the teacher loaded alone (each product with the kernel timed fastest for its
row count). Loading a draft makes the teacher's products row-invariant (`linear.row_invariant`,
oneDNN's packed weight for every row count): the speculative translator shares that teacher, whose
own greedy search is the exactness reference ("not the teacher's": outputs differing from it; "not
alone's": from the teacher loaded alone, which can differ at float32 near-ties in batches). Each
round times the three, the draft at each k, over the same sentences, and the best round of each is
kept (the machine is shared: the best round is the least disturbed one). Tokens per second counts output
pieces (EOS not counted) over the wall time of `Translator.translate`.

    python benchmarks/speculative.py runs/quickstart/model runs/student/model runs/quickstart/data \
        [--sentences 100] [--ks 1,2,3,4,6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch

from aiayn.decode.speculative import Draft
from aiayn.decode.translator import Translator

BATCH = 32


def run(translator: Translator, texts: list[str], per_call: int, **options) -> tuple[list[list[int]], float]:
    """Greedy outputs of `texts`, `per_call` at a time in one batch -> (their tokens, tokens/s)."""
    outputs: list[list[int]] = []
    began = time.perf_counter()
    for i in range(0, len(texts), per_call):
        found = translator.translate_batch(
            texts[i : i + per_call], beam_size=1, batch_tokens=10**9, **options
        )
        outputs += [t[0].tokens for t in found]
    seconds = time.perf_counter() - began
    return outputs, sum(map(len, outputs)) / seconds


def measure(alone: Translator, teacher: Translator, speculative: Translator, texts, ks, rounds: int):
    """{(per_call, k; -1 the teacher alone, 0 its greedy search with a draft loaded): best tokens/s},
    {(per_call, k): (acceptance, tokens per pass, differing from the teacher, from alone's)}."""
    best: dict[tuple[int, int], float] = {}
    stats: dict[tuple[int, int], tuple[float, float, int, int]] = {}
    differ = lambda a, b: sum(x != y for x, y in zip(a, b, strict=True))  # noqa: E731
    for _ in range(rounds):
        for per_call in (1, BATCH):
            plain, speed = run(alone, texts, per_call)
            best[per_call, -1] = max(best.get((per_call, -1), 0.0), speed)
            reference, speed = run(teacher, texts, per_call)
            best[per_call, 0] = max(best.get((per_call, 0), 0.0), speed)
            stats[per_call, 0] = (0.0, 1.0, 0, differ(reference, plain))
            for k in ks:
                speculative.draft.stats.__init__()
                found, speed = run(speculative, texts, per_call, draft_tokens=k)
                best[per_call, k] = max(best.get((per_call, k), 0.0), speed)
                s = speculative.draft.stats
                stats[per_call, k] = (
                    s.acceptance,
                    s.tokens_per_check,
                    differ(found, reference),
                    differ(found, plain),
                )
    return best, stats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("teacher", type=Path, help="the teacher's model directory")
    p.add_argument("draft", type=Path, help="the draft's model directory (the teacher's target vocabulary)")
    p.add_argument("data", type=Path, help="a data directory: its raw/test.src sentences are translated")
    p.add_argument("--sentences", type=int, default=100, help="test sentences (the first N)")
    p.add_argument("--ks", default="1,2,3,4,6", help="draft tokens per check to measure")
    p.add_argument("--rounds", type=int, default=2, help="rounds; the best of each row is kept")
    args = p.parse_args()
    lines = (args.data / "raw" / "test.src").read_text(encoding="utf-8").splitlines()
    texts = [line for line in lines if line.strip()][: args.sentences]
    ks = [int(k) for k in args.ks.split(",")]
    alone = Translator.load(args.teacher, device="cpu")
    teacher = Translator.load(args.teacher, device="cpu")
    draft = Draft.load(args.draft, args.teacher, teacher.model, teacher.tokenizer)
    speculative = Translator(teacher.model, teacher.tokenizer, teacher.info, draft=draft)
    params = [m.num_parameters() for m in (teacher.model, draft.model)]
    machine = platform.processor() or platform.machine()
    print(f"# {machine}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"# teacher {args.teacher} ({params[0]:,} parameters), draft {args.draft} ({params[1]:,})")
    print(f"# {len(texts)} sentences of {args.data / 'raw' / 'test.src'}, best of {args.rounds} rounds")
    best, stats = measure(alone, teacher, speculative, texts, ks, args.rounds)
    n = len(texts)
    columns = "vs teacher alone | accepted | tokens per pass | not the teacher's | not alone's"
    print(f"| per call | search | tokens/s | {columns} |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for per_call in (1, BATCH):
        base = best[per_call, -1]
        print(f"| {per_call} | teacher greedy, loaded alone | {base:,.1f} | 1.00x | | 1.00 | | |")
        for k in [0, *ks]:
            accepted, per_pass, differ, differ_alone = stats[per_call, k]
            speed, name = best[per_call, k], f"speculative k={k}" if k else "teacher greedy, draft loaded"
            shown = (f"{accepted:.1%}", f"{differ} of {n}") if k else ("", "")
            print(
                f"| {per_call} | {name} | {speed:,.1f} | {speed / base:.2f}x | {shown[0]} "
                f"| {per_pass:.2f} | {shown[1]} | {differ_alone} of {n} |"
            )


if __name__ == "__main__":
    main()
