"""One English -> {German, Spanish, French} model against three bilingual ones, on the LibreOffice help
(the built-in corpora libreoffice-en-de, -en-es, -en-fr, offline):

- the multilingual model: a recipe with `tags: true` (each source sentence after `>>de<<`, `>>es<<`
  or `>>fr<<`), trained for `--steps` updates of the quickstart's recipe;
- the bilingual models: each corpus prepared alone and trained for a third of `--steps`, so that the
  three together have the multilingual model's update budget.

Each is scored on its language's test split (the tagged test split holds the same pairs, each after
its tag, and is cut by tag; beam 4, sacreBLEU). Every output line of the multilingual model goes
through the language identifier of the cleaning rules (py3langid): the share identified as the
language its tag asked for says whether the tag decides the output language (lines of fewer than
`--min-chars` letters are too short to judge and counted apart).

    python benchmarks/multilingual.py [--out runs/multilingual] [--steps 3000] [--limit N]

`--limit` scores only the first N test pairs of each language; with small `--steps` it is a smoke run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from aiayn.data.cleaning import TAG
from aiayn.data.prepare import prepare
from aiayn.data.recipe import load_recipe
from aiayn.data.stage import read_lines
from aiayn_runs import bleu_on_test, command_line, train_model

LANGUAGES = ("de", "es", "fr")


def multilingual_recipe(out: Path) -> Path:
    """OUT/multilingual.yaml: the three corpora, tagged by target language."""
    body = {"src_lang": "en", "tags": True, "sources": [{"corpus": f"libreoffice-en-{x}"} for x in LANGUAGES]}
    recipe = out / "multilingual.yaml"
    out.mkdir(parents=True, exist_ok=True)
    recipe.write_text(yaml.safe_dump(body), encoding="utf-8")
    return recipe


def split_by_tag(data: Path, out: Path) -> dict[str, Path]:
    """The tagged test split cut by each source's tag into OUT/test-LANG/raw/test.src|tgt, what
    `aiayn evaluate` reads of a data directory -> {language: that directory}."""
    lines: dict[str, list[tuple[str, str]]] = {x: [] for x in LANGUAGES}
    for src, ref in zip(
        read_lines(data / "raw" / "test.src"), read_lines(data / "raw" / "test.tgt"), strict=True
    ):
        lines[TAG.match(src).group(0)[2:-3]].append((src, ref))  # ">>de<< ..." -> "de"
    dirs = {}
    for language, pairs in lines.items():
        dirs[language] = raw = out / f"test-{language}"
        (raw / "raw").mkdir(parents=True, exist_ok=True)
        for side, name in enumerate(("src", "tgt")):
            (raw / "raw" / f"test.{name}").write_text(
                "".join(p[side] + "\n" for p in pairs), encoding="utf-8"
            )
    return dirs


def identified(lines: list[str], language: str, min_chars: int) -> dict[str, int]:
    """How many of `lines` py3langid names `language`, names otherwise, or cannot judge (too short)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    counts = {"right": 0, "wrong": 0, "short": 0}
    for line in lines:
        if sum(c.isalpha() for c in line) < min_chars:
            counts["short"] += 1
        else:
            counts["right" if identifier.classify(line)[0] == language else "wrong"] += 1
    return counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("runs/multilingual"))
    p.add_argument("--steps", type=int, default=3000, help="the multilingual model's updates (a third each)")
    p.add_argument("--limit", type=int, help="score only the first N test pairs of each language")
    p.add_argument("--min-chars", type=int, default=20, help="shorter output lines are not identified")
    args = p.parse_args()
    data = prepare(args.out / "data-mul", load_recipe(multilingual_recipe(args.out)), progress=False)
    model = train_model(data, args.out / "run-mul", args.steps)
    rows = {}
    for language, test in split_by_tag(data, args.out).items():
        bleu, hypotheses = bleu_on_test(model, test, args.out / "run-mul" / f"eval-{language}", args.limit)
        lines = hypotheses.read_text(encoding="utf-8").splitlines()
        rows[language] = {"multilingual": bleu, **identified(lines, language, args.min_chars)}
        bilingual = prepare(args.out / f"data-{language}", f"libreoffice-en-{language}", progress=False)
        run = args.out / f"run-{language}"
        model_x = train_model(bilingual, run, args.steps // 3)
        rows[language]["bilingual"] = bleu_on_test(model_x, bilingual, run / "eval", args.limit)[0]
    _table(rows, args)
    (args.out / "result.json").write_text(
        json.dumps({"args": {**vars(args), "out": str(args.out)}, "rows": rows}, indent=1) + "\n"
    )
    return 0


ROW = "{:<5} {:>17} {:>14} {:>10} {:>5} {:>5}"


def _table(rows: dict, args: argparse.Namespace) -> None:
    print(ROW.format("en->", "multilingual BLEU", "bilingual BLEU", "tag obeyed", "wrong", "short"))
    for language, row in rows.items():
        judged = row["right"] + row["wrong"]
        obeyed = f"{row['right'] / judged:.1%}" if judged else "-"
        bleu = f"{row['multilingual']:.2f}", f"{row['bilingual']:.2f}"
        print(ROW.format(language, *bleu, obeyed, row["wrong"], row["short"]))
    print(
        f"budget: {args.steps} updates for the multilingual model, {args.steps // 3} for each bilingual one"
    )
    print(command_line())


if __name__ == "__main__":
    raise SystemExit(main())
