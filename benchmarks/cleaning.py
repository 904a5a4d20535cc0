"""Does cleaning pay? The Bible es -> en training set with injected noise, reproducibly (`--seed`):

    wrong_language  the source replaced by an English verse, or the target by a Spanish one
    misaligned      the target of another verse (shuffled pairs)
    duplicate       an earlier pair again, exactly or with its case and punctuation changed
    copy            the target replaced by the source

`--noise` (0.3) of the final pairs are injected, the four kinds in equal parts. The script writes the
clean and the noisy corpus as files (valid and test: the Bible's own, untouched), prepares the noisy
one with `--clean`, and prints each rule's precision (the share of what it removed that was noise)
and each kind of noise's recall (the share of it that some rule removed), from the data directory's
cleaning/reasons.npy against the injected labels. With `--train`, it then trains the quickstart's
recipe on the clean, the noisy and the cleaned data and prints each one's test BLEU (beam 4).

The score rule (dual conditional cross-entropy, `aiayn.data.scoring`) runs too, after the other four,
with `--score-models FORWARD REVERSE` (an es->en and an en->es model directory) or `--score-steps N`
(both trained here on the clean train split with the quickstart's recipe for N updates, as
Junczys-Dowmunt (2018) trained them on clean data; with `--train` and `--score-steps` equal to `--steps`,
the clean run is the es->en one); it is the one rule that sees misaligned pairs,
and the report gives their recall by it (`misaligned_by_score`). `--score-drop` is its share (0.1:
about the misaligned share of what the other rules keep at --noise 0.3).

    python benchmarks/cleaning.py [--out runs/cleaning] [--noise 0.3] [--train] [--steps 1000]
        [--score-steps 1000 | --score-models FWD REV] [--score-drop 0.1] [--pairs N] [--limit N]

`--pairs` and `--limit` (the test pairs scored) make a smoke run small.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import numpy as np

from aiayn.data.builtin import load_builtin
from aiayn.data.cleaning import RULES, Cleaning, Score
from aiayn.data.prepare import prepare
from aiayn.data.sources import PairFiles, SplitFiles
from aiayn_runs import bleu_on_test, command_line, train_model

KINDS = ("wrong_language", "misaligned", "duplicate", "copy")


def _perturb(text: str, rng: random.Random) -> str:
    """The same words with another case and punctuation: a near duplicate."""
    text = re.sub(r"[,;:.!?]", "", text)
    return text.upper() if rng.random() < 0.5 else text.lower() + "."


def noisy(pairs: list[tuple[str, str]], share: float, seed: int) -> tuple[list[tuple[str, str]], list[str]]:
    """The pairs with `share` of the result injected noise, each labelled ("clean" or a KIND). A
    duplicate is placed after its original (the rule keeps the first of the two)."""
    rng = random.Random(seed)
    n, n_noise = len(pairs), round(len(pairs) * share / (1 - share))
    placed = [(float(i), s, t, "clean") for i, (s, t) in enumerate(pairs)]  # (position, src, tgt, label)
    for k in range(n_noise):
        kind = KINDS[k % len(KINDS)]
        j = rng.randrange(n)
        (s, t), (other_s, other_t) = pairs[j], pairs[rng.randrange(n)]
        where = rng.uniform(j + 0.1, n) if kind == "duplicate" else rng.uniform(-0.5, n)
        if kind == "wrong_language":
            s, t = (other_t, t) if rng.random() < 0.5 else (s, other_s)
        elif kind == "misaligned":
            t = other_t
        elif kind == "duplicate" and rng.random() < 0.5:
            s, t = _perturb(s, rng), _perturb(t, rng)
        elif kind == "copy":
            t = s
        placed.append((where, s, t, kind))
    placed.sort(key=lambda p: p[0])
    return [(s, t) for _, s, t, _ in placed], [label for *_, label in placed]


def write(pairs: list[tuple[str, str]], folder: Path, name: str, langs=("es", "en")) -> PairFiles:
    folder.mkdir(parents=True, exist_ok=True)
    files = PairFiles(folder / f"{name}.{langs[0]}", folder / f"{name}.{langs[1]}")
    for path, side in ((files.src, 0), (files.tgt, 1)):
        path.write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    return files


def scores(reasons: np.ndarray, labels: list[str]) -> dict:
    """Each rule's precision and each kind's recall; the original duplicates of the clean Bible (its
    repeated verses) count as what they are: removed clean pairs, which lower precision."""
    labels_arr = np.array(labels)
    noise = labels_arr != "clean"
    by_rule = {}
    for i, rule in enumerate(RULES, start=1):
        removed = reasons == i
        by_rule[rule] = {
            "removed": int(removed.sum()),
            "precision": float(noise[removed].mean()) if removed.any() else None,
        }
    recall = {kind: float((reasons[labels_arr == kind] > 0).mean()) for kind in KINDS}
    kept_noise = int((noise & (reasons == 0)).sum())
    clean_removed = int((~noise & (reasons > 0)).sum())
    by_score = float((reasons[labels_arr == "misaligned"] == RULES.index("score") + 1).mean())
    return {
        "rules": by_rule,
        "recall": recall,
        "misaligned_by_score": by_score,
        "noise_kept": kept_noise,
        "clean_removed": clean_removed,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("runs/cleaning"))
    p.add_argument("--noise", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train", action="store_true", help="also train and score the three data directories")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--pairs", type=int, help="only the first N train pairs (smoke runs)")
    p.add_argument("--limit", type=int, help="score only the first N test pairs (smoke runs)")
    score = p.add_mutually_exclusive_group()
    score.add_argument("--score-models", nargs=2, type=Path, metavar=("FORWARD", "REVERSE"))
    score.add_argument("--score-steps", type=int, help="train the score rule's models for N updates")
    p.add_argument("--score-drop", type=float, default=0.1)
    args = p.parse_args()
    splits = load_builtin("bible-es-en")
    splits["train"] = splits["train"][: args.pairs]
    pairs, labels = noisy(splits["train"], args.noise, args.seed)
    held = {split: write(splits[split], args.out / "text", split) for split in ("valid", "test")}
    datasets, models = {"clean": _prepare(args.out, "clean", splits["train"], held, None)}, {}
    if args.train and args.score_steps == args.steps:  # the clean run is the score rule's forward model
        models["clean"] = train_model(datasets["clean"], args.out / "run-clean", args.steps)
    cleaning = Cleaning(score=_score_models(args, splits, held, models.get("clean")))
    for name, data, clean in [
        ("noisy", pairs, False),
        ("cleaned", pairs, True),
        ("clean-cleaned", splits["train"], True),
    ]:
        datasets[name] = _prepare(args.out, name, data, held, cleaning if clean else None)
    reasons = np.load(datasets["cleaned"] / "cleaning" / "reasons.npy")
    result = {
        "pairs": len(pairs),
        "noise": int(sum(lab != "clean" for lab in labels)),
        **scores(reasons, labels),
    }
    alone = np.load(datasets.pop("clean-cleaned") / "cleaning" / "reasons.npy")  # the Bible's own repeats
    result["clean_corpus_removed"] = {rule: int((alone == i).sum()) for i, rule in enumerate(RULES, start=1)}
    print(json.dumps(result, indent=1))
    _table(result)
    if args.train:
        result["bleu"] = {}
        for name, path in datasets.items():
            model = models.get(name) or train_model(path, args.out / f"run-{name}", args.steps)
            result["bleu"][name] = bleu_on_test(model, path, args.out / f"run-{name}" / "eval", args.limit)[0]
        print(json.dumps(result["bleu"], indent=1))
    (args.out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    print(command_line())
    return 0


def _prepare(out: Path, name: str, pairs: list, held: dict, cleaning: Cleaning | None) -> Path:
    """OUT/NAME: `pairs` as the train split (es -> en), the Bible's valid and test, cleaned or not."""
    files = SplitFiles(write(pairs, out / "text", f"train-{name}"), held["valid"], held["test"])
    return prepare(out / name, files, src_lang="es", tgt_lang="en", progress=False, clean=cleaning)


def _score_models(args: argparse.Namespace, splits: dict, held: dict, forward: Path | None) -> Score | None:
    """The score rule's models: given, or an es->en and an en->es model trained on the clean train
    split for --score-steps updates (`forward`, when the clean run already is that es->en model);
    None: no score rule."""
    if args.score_models:
        return Score(*args.score_models, drop=args.score_drop)
    if not args.score_steps:
        return None
    models = [forward] if forward else []
    for name, swap in (("forward", False), ("reverse", True))[len(models) :]:
        langs = ("en", "es") if swap else ("es", "en")
        flip = (lambda pairs: [(t, s) for s, t in pairs]) if swap else list
        text = args.out / "text" / name
        files = SplitFiles(*(write(flip(splits[k]), text, k, langs) for k in ("train", "valid", "test")))
        data = prepare(args.out / f"score-{name}", files, progress=False)
        models.append(train_model(data, args.out / f"run-score-{name}", args.score_steps))
    return Score(*models, drop=args.score_drop)


def _table(result: dict) -> None:
    """Each rule's removals and precision, each kind's recall."""
    print(f"{'rule':<16} {'removed':>8} {'precision':>9}")
    for rule, row in result["rules"].items():
        precision = "-" if row["precision"] is None else f"{row['precision']:.3f}"
        print(f"{rule:<16} {row['removed']:>8} {precision:>9}")
    print(f"{'noise kind':<16} {'recall':>8}")
    for kind, recall in result["recall"].items():
        print(f"{kind:<16} {recall:>8.3f}")
    print(f"{'misaligned, by the score rule':<30} {result['misaligned_by_score']:.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
