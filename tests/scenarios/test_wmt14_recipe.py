"""The WMT14 en-de recipe (configs/data/wmt14-en-de.yaml, docs/wmt14.md) end to end on a synthetic
corpus laid out as WMT 2014's files are: prepare, train, average, evaluate (no download)."""

from __future__ import annotations

import json
import shutil

import pytest
from tests.toy import write_parallel
from tests.toy_translation import unrelated_pairs

from aiayn.cli import main
from aiayn.configs import config_path

RECIPE = config_path("tiny").parent / "data" / "wmt14-en-de.yaml"
FILES = {
    "training/europarl-v7.de-en": 300,
    "commoncrawl.de-en": 200,
    "training/news-commentary-v9.de-en": 100,
    "newstest2013": 30,
    "newstest2014": 30,
}


@pytest.mark.slow
def test_the_recipe_runs_end_to_end_on_files_laid_out_as_wmt14s(tmp_path, capsys):
    for seed, (name, n) in enumerate(FILES.items()):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        pairs = unrelated_pairs(n, seed)
        if name == "commoncrawl.de-en":
            pairs += [pairs[0], ("the same on both sides", "the same on both sides")]  # crawl's noise
        write_parallel(pairs, tmp_path / f"{name}.en", tmp_path / f"{name}.de")
    recipe = shutil.copy(RECIPE, tmp_path / "wmt14-en-de.yaml")
    data, run = tmp_path / "data", tmp_path / "run"
    assert (
        main(["prepare", "--recipe", str(recipe), "--vocab-size", "200", "--out", str(data), "--no-progress"])
        == 0
    )
    meta = json.loads((data / "meta.json").read_text())
    assert [s["name"] for s in meta["sources"]] == ["europarl", "commoncrawl", "news-commentary"]
    assert meta["sources"][1]["removed"] == {"duplicates": 1, "copies": 1}
    assert meta["pairs"]["valid"] == 30 and meta["pairs"]["test"] == 30 and meta["tgt_lang"] == "de"
    train = ["train", str(data), "--out", str(run), "--preset", "tiny", "--max-steps", "3", "--no-progress"]
    assert (
        main([*train, "--set", "save_every=1", "--set", "max_tokens=500", "--set", "update_tokens=500"]) == 0
    )
    assert main(["average", str(run), "--last", "5"]) == 0
    evaluate = [
        "evaluate",
        str(run / "model"),
        str(data),
        "--split",
        "test",
        "--beam",
        "2",
        "--max-len-b",
        "5",
    ]
    assert main([*evaluate, "--no-progress", "--out", str(tmp_path / "eval")]) == 0
    scores = json.loads((tmp_path / "eval" / "scores.json").read_text())
    assert scores["split"] == "test" and "BLEU" in scores["bleu_text"]
