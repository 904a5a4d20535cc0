"""Does cleaning change `aiayn prepare`'s memory growth? `prepare` of a synthetic corpus at each of
`--pairs` sizes, without and with `--clean` (duplicates, near duplicates, copies, the wrong
language), each in its own process: wall and CPU seconds, peak RSS, and what each rule removed.

The corpus is scale.py's (Zipfian words, ~25 a sentence, up to 220, the target's length the
source's +-20%) with real words: the Bible's Spanish and English word types, ranked by their
frequency in bible-es-en's train split, so that the language rule has languages to identify (es ->
en). Memory growth is the difference of peak RSS between two sizes over the difference of pairs:
bytes a pair, without and with cleaning.

    python benchmarks/cleaning_scale.py [--pairs 500000,1000000] [--out runs/cleaning-scale]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from aiayn.data.builtin import load_builtin
from aiayn_runs import command_line
from scale import aiayn, measured, write_corpus


def bible_words() -> tuple[list[str], list[str]]:
    """Each side's word types of bible-es-en's train split, the most frequent first."""
    counts = Counter(), Counter()
    for pair in load_builtin("bible-es-en")["train"]:
        for side, text in enumerate(pair):
            counts[side].update(text.split())
    return tuple([w for w, _ in c.most_common()] for c in counts)


def one_size(out: Path, pairs: int, vocab: tuple) -> dict:
    """prepare without and with --clean of `pairs` pairs -> {"plain": run, "clean": run, "dropped"}."""
    prefix = out / f"corpus-{pairs}"
    src, tgt = write_corpus(prefix, pairs, vocab=vocab)
    row = {"pairs": pairs}
    for name, flags in (("plain", []), ("clean", ["--clean"])):
        data = out / f"data-{name}-{pairs}"
        command = ["prepare", "--src", str(src), "--tgt", str(tgt), "--src-lang", "es", "--tgt-lang", "en"]
        command += ["--out", str(data), "--force", "--no-progress", *flags]
        row[name] = measured(aiayn(*command), out / f"prepare-{name}-{pairs}.log")
        meta = json.loads((data / "meta.json").read_text())
        row[name]["train_pairs"] = meta["pairs"]["train"]
        row["dropped"] = meta["dropped"]["train"]
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", default="500000,1000000", help="comma-separated corpus sizes")
    p.add_argument("--out", type=Path, default=Path("runs/cleaning-scale"))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    vocab = bible_words()
    rows = [one_size(args.out, int(n), vocab) for n in args.pairs.split(",")]
    print(f"{'pairs':>9} {'cleaning':>8} {'wall s':>7} {'CPU s':>7} {'peak RSS MB':>11} {'train pairs':>11}")
    for row in rows:
        for name in ("plain", "clean"):
            r = row[name]
            print(
                f"{row['pairs']:>9,} {name:>8} {r['wall_s']:>7.0f} {r['cpu_s']:>7.0f} {r['rss_mb']:>11.0f} "
                f"{r['train_pairs']:>11,}"
            )
        print(f"{'':>9} removed by rule: {row['dropped']}")
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        for name in ("plain", "clean"):
            growth = (last[name]["rss_mb"] - first[name]["rss_mb"]) * 2**20 / (last["pairs"] - first["pairs"])
            print(f"memory growth, {name}: {growth:.0f} bytes a pair")
    print(command_line())
    (args.out / "result.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
