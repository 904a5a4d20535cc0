"""Does back-translation pay in low resource? Spanish -> English with `--pairs` (3,000) parallel Bible
verses (a seeded sample of bible-es-en's train split), with and without back-translated English:

1. an English -> Spanish model is trained on the same 3,000 pairs (the quickstart's recipe);
2. it back-translates (`aiayn backtranslate`) `--mono` English verses of the World English Bible
   (bible-es-en-web's train side), verses outside the 3,000, so the synthetic pairs add text the real
   ones lack: once sampled (the command's default) and once with beam 4 (`--modes`);
3. Spanish -> English models train for the same `--steps` updates (the same update budget): one on
   the 3,000 pairs alone, and one a back-translation on a recipe of the 3,000 and its synthetic
   pairs (weight 1; the real pairs `--real-weight`);
4. each is scored on the Bible's test split (beam 4, sacreBLEU), and a table printed.

    python benchmarks/backtranslation.py [--out runs/backtranslation] [--pairs 3000] [--mono 20000]
        [--steps 1000] [--reverse-steps 1000] [--modes sample,beam] [--real-weight 1] [--limit N]

`--limit` scores only the first N test pairs; with small `--pairs`, `--mono` and `--steps` it is a
smoke run.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path

import yaml

from aiayn.data.builtin import load_builtin
from aiayn.data.prepare import prepare
from aiayn.data.recipe import load_recipe
from aiayn.data.sources import PairFiles, SplitFiles
from aiayn_runs import AIAYN, bleu_on_test, command_line, train_model


def write(pairs: list[tuple[str, str]], folder: Path, name: str, langs: tuple[str, str]) -> PairFiles:
    folder.mkdir(parents=True, exist_ok=True)
    files = PairFiles(folder / f"{name}.{langs[0]}", folder / f"{name}.{langs[1]}")
    for path, side in ((files.src, 0), (files.tgt, 1)):
        path.write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    return files


def low_resource(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """The `--pairs` sampled train pairs with the Bible's valid and test, and `--mono` WEB English
    verses outside them (the same verse order: bible-es-en-web's train pairs share their sources)."""
    kjv, web = load_builtin("bible-es-en"), load_builtin("bible-es-en-web")
    rng = random.Random(args.seed)
    chosen = sorted(rng.sample(range(len(kjv["train"])), args.pairs))
    taken = {kjv["train"][i][0] for i in chosen}
    english = [t for s, t in web["train"] if s not in taken]
    mono = rng.sample(english, min(args.mono, len(english)))
    return {"train": [kjv["train"][i] for i in chosen], "valid": kjv["valid"], "test": kjv["test"]}, mono


MODES = {"sample": [], "beam": ["--beam", "4"]}  # `aiayn backtranslate`'s flags for each


def back_translate(splits: dict, mono: list[str], args: argparse.Namespace) -> dict[str, Path]:
    """Train the English -> Spanish model on the swapped pairs and back-translate `mono` with it in
    each of `--modes` -> {mode: OUT/bt-MODE, holding bt.es and bt.en}."""
    swapped = {
        k: write([(t, s) for s, t in v], args.out / "text" / "reverse", k, ("en", "es"))
        for k, v in splits.items()
    }
    data = prepare(args.out / "data-reverse", SplitFiles(*swapped.values()), **_sizes(args))
    reverse = train_model(data, args.out / "run-reverse", args.reverse_steps or args.steps)
    text = args.out / "text" / "mono.en"
    text.write_text("".join(line + "\n" for line in mono), encoding="utf-8")
    done = {}
    for mode in args.modes.split(","):
        done[mode] = args.out / f"bt-{mode}"
        subprocess.run([*AIAYN, "backtranslate", str(reverse), str(text), "--out", str(done[mode])]
                       + [*MODES[mode], "--no-progress"], check=True)  # fmt: skip
    return done


def with_bt(forward: dict[str, PairFiles], bt: Path, out: Path, real_weight: float = 1.0) -> Path:
    """OUT/with-bt.yaml: the real pairs (weight `real_weight`) and the synthetic ones (weight 1), the
    same valid/test."""
    files = lambda f: {"src": str(f.src), "tgt": str(f.tgt)}  # noqa: E731
    sources = [
        {"name": "real", "weight": real_weight, **files(forward["train"])},
        {"name": "bt", **files(PairFiles(bt / "bt.es", bt / "bt.en"))},
    ]
    body = {"src_lang": "es", "tgt_lang": "en", "sources": sources}
    body |= {split: files(forward[split]) for split in ("valid", "test")}
    recipe = out / f"with-{bt.name}.yaml"
    recipe.write_text(yaml.safe_dump(body, allow_unicode=True), encoding="utf-8")
    return recipe


def _sizes(args: argparse.Namespace) -> dict:
    return {"vocab_size": args.vocab_size, "progress": False}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("runs/backtranslation"))
    p.add_argument("--pairs", type=int, default=3000, help="parallel verses")
    p.add_argument("--mono", type=int, default=20000, help="WEB English verses back-translated")
    p.add_argument("--steps", type=int, default=1000, help="updates of each Spanish -> English model")
    p.add_argument("--reverse-steps", type=int, help="updates of the English -> Spanish model (--steps)")
    p.add_argument("--modes", default="sample,beam", help="back-translation by sampling, beam 4, or both")
    p.add_argument("--real-weight", type=float, default=1.0, help="the real pairs' weight (synthetic: 1)")
    p.add_argument("--vocab-size", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=int, help="score only the first N test pairs (smoke runs)")
    args = p.parse_args()
    splits, mono = low_resource(args)
    forward = {k: write(v, args.out / "text", k, ("es", "en")) for k, v in splits.items()}
    bts = back_translate(splits, mono, args)
    datasets = {
        "parallel only": prepare(args.out / "data-parallel", SplitFiles(*forward.values()), **_sizes(args))
    }
    for mode, bt in bts.items():
        recipe = load_recipe(with_bt(forward, bt, args.out, args.real_weight))
        datasets[f"+ back-translated ({mode})"] = prepare(
            args.out / f"data-{bt.name}", recipe, **_sizes(args)
        )
    rows = {}
    for i, (name, data) in enumerate(datasets.items()):
        model = train_model(data, args.out / f"run-{i}", args.steps)
        bleu = bleu_on_test(model, data, args.out / f"run-{i}" / "eval", args.limit)[0]
        rows[name] = {
            "train_pairs": json.loads((data / "meta.json").read_text())["pairs"]["train"],
            "bleu": bleu,
        }
    print(f"{'es->en, ' + str(args.pairs) + ' parallel verses':<34} {'train pairs':>11} {'test BLEU':>9}")
    for name, row in rows.items():
        print(f"{name:<34} {row['train_pairs']:>11,} {row['bleu']:>9.2f}")
    print(f"the same update budget: {args.steps} updates each; {len(mono):,} WEB verses back-translated")
    print(command_line())
    result = {"args": {**vars(args), "out": str(args.out)}, "rows": rows}
    (args.out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
