"""Parsing end to end on the CPU: prepare synthetic trees, train a tiny model a few steps, average,
evaluate (labelled F1). A barely trained model still emits only well-formed trees,
one terminal per word; the Parser API and the right-branching baseline on the same data."""

from __future__ import annotations

import json

import pytest

from aiayn.cli import main
from aiayn.config import DecodeConfig
from aiayn.parse.evaluate import baseline_labels, evaluate_baseline, right_branching
from aiayn.parse.parser import Parser
from aiayn.parse.prepare import prepare_trees
from aiayn.parse.trees import Tree, parse_trees, read_tree_lines

OVERRIDES = ["d_model=32", "d_ff=64", "n_layers=1", "n_heads=2", "max_tokens=800", "update_tokens=800"]
OVERRIDES += ["warmup_steps=4", "lr_peak=3e-3", "eval_every=100", "save_every=3", "log_every=1"]


def test_prepare_train_average_evaluate(tmp_path, capsys):
    data = prepare_trees(tmp_path / "data", synthetic={"train": 120, "valid": 8, "test": 10}, progress=False)
    run = tmp_path / "run"
    args = ["train", str(data), "--out", str(run), "--preset", "tiny", "--max-steps", "6", "--no-progress"]
    assert main(args + [a for o in OVERRIDES for a in ("--set", o)]) == 0
    assert main(["average", str(run), "--last", "2"]) == 0
    info = json.loads((run / "model" / "config.json").read_text())
    assert (
        info["task"] == "parse"
        and info["parse"]["labels"] == json.loads((data / "meta.json").read_text())["parse"]["labels"]
    )
    capsys.readouterr()

    # a barely trained model writes trees as long as it may: keep the limit short for speed
    assert (
        main(["evaluate", str(run / "model"), str(data), "--no-progress", "--beam", "3", "--max-len-b", "9"])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("parseval F1 = ") and " (P = " in out[0]
    scores = json.loads((run / "model" / "eval" / "scores.json").read_text())
    assert scores["decode"]["beam_size"] == 3 and scores["decode"]["alpha"] == 0.3  # 6.3's alpha by default
    assert scores["sentences"] == 10 and scores["error_sentences"] == scores["skipped_sentences"] == 0
    golds = read_tree_lines(data / "raw" / "test.tree")
    hyps = read_tree_lines(run / "model" / "eval" / "test.hyp")
    for gold, hyp in zip(golds, hyps, strict=True):
        assert isinstance(hyp, Tree)
        leaves = hyp.preterminals()
        assert [(p.label, p.word) for p in leaves] == [(p.label, p.word) for p in gold.preterminals()]

    parser = Parser.load(run / "model")  # labels from its config.json
    words = [["the", "dog", "saw", "a", "cat", "with", "a", "telescope", "."], ["John", "slept"]]
    trees = parser.parse(words, DecodeConfig(beam_size=2, alpha=0.3, max_len_b=9))
    assert [t.words() for t in trees] == words
    assert all(p.label == "XX" for t in trees for p in t.preterminals())


@pytest.mark.parametrize(
    "task, extra, expected",
    [
        ("parse", [], (21, 0.3, 1.0, 300)),  # section 6.3
        ("parse", ["--beam", "5", "--max-len-b", "40"], (5, 0.3, 1.0, 40)),
        (None, [], (4, 0.6, 1.0, 50)),  # section 6.1
        (None, ["--alpha", "1.0"], (4, 1.0, 1.0, 50)),
    ],
)
def test_evaluate_searches_with_the_papers_settings_for_the_task(
    tmp_path, monkeypatch, task, extra, expected
):
    import aiayn.evaluate
    import aiayn.parse.evaluate

    (tmp_path / "meta.json").write_text(json.dumps({"task": task} if task else {}))
    seen = {}

    def fake(model, data, split, options, **kwargs):
        seen["options"] = options
        return {"parseval_text": "", "bleu_text": "", "chrf_text": ""}

    monkeypatch.setattr(aiayn.parse.evaluate, "evaluate_parser", fake)
    monkeypatch.setattr(aiayn.evaluate, "evaluate_model", fake)
    assert main(["evaluate", str(tmp_path / "model"), str(tmp_path), *extra]) == 0
    options = seen["options"]
    assert (options.beam_size, options.alpha, options.max_len_a, options.max_len_b) == expected


def test_right_branching_baseline(tmp_path, capsys):
    gold = next(parse_trees("(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))", "t"))[1]
    assert str(right_branching(gold, "S", "NP")) == (
        "(S (DT The) (NP (NN dog) (NP (VBD saw) (NP (DT a) (NP (NN cat) (. .))))))"
    )
    one = next(parse_trees("(S (NN Hello))", "t"))[1]
    assert str(right_branching(one, "S", "NP")) == "(S (NN Hello))"
    data = prepare_trees(tmp_path / "data", synthetic={"train": 100, "valid": 5, "test": 30}, progress=False)
    assert baseline_labels(read_tree_lines(data / "raw" / "train.tree")) == ("S", "NP")
    scores = evaluate_baseline(data, "test")
    assert 0 < scores["f1"] < 60 and scores["error_sentences"] == 0
    assert main(["evaluate", str(data), "--baseline", "right-branching", "--out", str(tmp_path / "rb")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == scores["parseval_text"]
    assert len(read_tree_lines(tmp_path / "rb" / "test.hyp")) == 30
