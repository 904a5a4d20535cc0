"""Parser evaluation (aiayn.parse.evaluate): tree files scored, and the right-branching baseline."""

from __future__ import annotations

import pytest

from aiayn.cli import main
from aiayn.errors import AiaynError
from aiayn.parse.evaluate import baseline_labels, evaluate_tree_files, right_branching
from aiayn.parse.trees import parse_trees


def test_tree_files_and_the_cli_line(tmp_path, capsys):
    ref, hyp = tmp_path / "ref.tree", tmp_path / "hyp.tree"
    ref.write_text(
        "(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))\n"
        "(S (NP (NP (NNS dogs))) (VP (VBP bark)))\n"
    )
    hyp.write_text(
        "(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a)) (NN cat)) (. .))\n"
        "(S (NP (NNS dogs)) (VP (VBP bark)))\n"
    )
    assert evaluate_tree_files(hyp, ref)["f1"] == pytest.approx(80.0)
    assert main(["evaluate", "--metric", "parseval", "--hyp", str(hyp), "--ref", str(ref)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "parseval F1 = 80.00 (P = 85.71, R = 75.00)"
    hyp.write_text("(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))\n\n")
    assert main(["evaluate", "--metric", "parseval", "--hyp", str(hyp), "--ref", str(ref)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "parseval F1 = 100.00 (P = 100.00, R = 100.00); 1 of 2 sentences left out (0 errors, 1 skipped)"
    )
    hyp.write_text("(S (NN a))\n")
    with pytest.raises(AiaynError, match="has 1 lines but .* has 2"):
        evaluate_tree_files(hyp, ref)


def test_the_baseline_branches_right_under_train_s_commonest_labels():
    train = [
        next(parse_trees(text, "train"))[1]
        for text in ("(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))", "(S (NN a))")
    ]
    assert baseline_labels(train) == ("S", "NP")  # NP: 2 of the 3 inner constituents
    assert str(right_branching(train[0], "S", "NP")) == (
        "(S (DT The) (NP (NN dog) (NP (VBD saw) (NP (DT a) (NP (NN cat) (. .))))))"
    )
    assert str(right_branching(train[1], "S", "NP")) == "(S (NN a))"  # one word: under the root
