"""Labelled bracketing P/R/F1 against hand-computed values, one EVALB (COLLINS.prm) convention each."""

from __future__ import annotations

import pytest

from aiayn.parse.parseval import brackets, parseval, score_sentence
from aiayn.parse.trees import Tree, parse_trees


def tree(text: str) -> Tree:
    return next(parse_trees(text, "test"))[1]


def prf(gold: str, test: str) -> tuple[float, float, float]:
    scores = parseval([tree(gold)], [tree(test)])
    return scores["precision"], scores["recall"], scores["f1"]


def test_one_wrong_bracket_of_four():
    # words The dog saw a cat (the final "." is deleted); gold S 0-5, NP 0-2, VP 2-5, NP 3-5;
    # test S 0-5, NP 0-2, VP 2-5, NP 3-4: 3 of 4 match on each side. POS tags are no brackets.
    gold = "(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))"
    test = "(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a)) (NN cat)) (. .))"
    assert prf(gold, test) == pytest.approx((75.0, 75.0, 75.0))
    assert brackets(tree(gold))[1] == {("S", 0, 5): 1, ("NP", 0, 2): 1, ("VP", 2, 5): 1, ("NP", 3, 5): 1}


def test_punctuation_is_deleted_before_spans_are_compared():
    # the test VP takes the final "." (span 1-3 with it), the gold VP does not (1-2): equal once "." goes
    gold = "(S (NP (NNP John)) (VP (VBD left)) (. .))"
    test = "(S (NP (NNP John)) (VP (VBD left) (. .)))"
    assert prf(gold, test) == pytest.approx((100.0, 100.0, 100.0))
    # a constituent of punctuation only spans nothing and is not counted (PRN here): 3 brackets each
    gold = "(S (NP (NNP Mary)) (VP (VBD came)) (PRN (, ,) (: --) (`` ``) ('' '')) (. .))"
    test = "(S (NP (NNP Mary)) (VP (VBD came) (, ,) (: --)) (`` ``) ('' '') (. .))"
    assert sum(brackets(tree(gold))[1].values()) == 3
    assert prf(gold, test) == pytest.approx((100.0, 100.0, 100.0))


def test_top_is_not_counted_and_prt_equals_advp_and_function_tags_are_cut():
    # gold: TOP (not counted), S 0-5, NP-SBJ -> NP 0-1, VP 1-5, PRT 2-3, NP 3-5: 5 brackets;
    # test: S, NP, VP, ADVP 2-3, NP: all 5 match (were TOP counted, recall would be 5/6)
    gold = "(TOP (S (NP-SBJ-1 (PRP He)) (VP (VBD picked) (PRT (RP up)) (NP (DT the) (NN book))) (. .)))"
    test = "(S (NP (PRP He)) (VP (VBD picked) (ADVP (RP up)) (NP=2 (DT the) (NN book))) (. .))"
    assert prf(gold, test) == pytest.approx((100.0, 100.0, 100.0))
    # and a real label error on the same span counts: ADJP is not ADVP
    wrong = test.replace("ADVP", "ADJP")
    assert prf(gold, wrong) == pytest.approx((80.0, 80.0, 80.0))


def test_the_unlabelled_ptb_root_counts_as_nothing():
    plain = "(S (NP (PRP It)) (VP (VBZ rains)) (. .))"
    assert brackets(tree(f"( {plain} )"))[1] == brackets(tree(plain))[1]
    assert brackets(tree(f"(ROOT {plain})"))[1] == brackets(tree(plain))[1]
    assert prf(f"( {plain} )", plain) == pytest.approx((100.0, 100.0, 100.0))


def test_repeated_brackets_match_as_many_times_as_both_have_them():
    # EVALB README [7] 5): gold has NP 0-1 twice (a unary NP over NP), test once:
    # gold S, NP, NP, VP (4); test S, NP, VP (3); matched 3: P = 3/3, R = 3/4, F1 = 2PR/(P+R)
    gold = "(S (NP (NP (NNS dogs))) (VP (VBP bark)))"
    test = "(S (NP (NNS dogs)) (VP (VBP bark)))"
    assert prf(gold, test) == pytest.approx((100.0, 75.0, 2 * 100 * 75 / 175))
    assert prf(test, gold) == pytest.approx((75.0, 100.0, 2 * 100 * 75 / 175))


def test_labels_must_match_on_equal_spans():
    # gold S 0-3, NP 0-2, VP 2-3; test S 0-3, VP 0-2, VP 2-3: 2 of 3
    gold = "(S (NP (DT the) (NN man)) (VP (VBD slept)))"
    test = "(S (VP (DT the) (NN man)) (VP (VBD slept)))"
    assert prf(gold, test) == pytest.approx((200 / 3, 200 / 3, 200 / 3))


def test_corpus_scores_pool_brackets_over_sentences():
    # sentence 1: 3 matched of 4 gold, 4 test; sentence 2: 3 matched of 4 gold, 3 test
    # P = 6/7, R = 6/8, F1 = 2 * 6 / (7 + 8) = 80 (not the mean of the sentence F1s, 80.36)
    golds = [
        tree("(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))"),
        tree("(S (NP (NP (NNS dogs))) (VP (VBP bark)))"),
    ]
    tests = [
        tree("(S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a)) (NN cat)) (. .))"),
        tree("(S (NP (NNS dogs)) (VP (VBP bark)))"),
    ]
    scores = parseval(golds, tests)
    assert (scores["matched"], scores["gold_brackets"], scores["test_brackets"]) == (6, 8, 7)
    assert (scores["precision"], scores["recall"], scores["f1"]) == pytest.approx((600 / 7, 75.0, 80.0))


def test_sentences_with_other_words_are_errors_and_empty_ones_are_skipped():
    gold = tree("(S (NP (NNP John)) (VP (VBD left)) (. .))")
    # punctuation is deleted by each tree's own tags: "." tagged XX stays, so the lengths differ
    assert score_sentence(gold, tree("(S (XX John) (XX left) (XX .))")).status == "error"
    assert score_sentence(gold, tree("(S (NP (NNP Jane)) (VP (VBD left)) (. .))")).reason == (
        "words mismatch (John | Jane)"
    )
    assert score_sentence(gold, None).status == "skip"
    good = tree("(S (NP (NNP John)) (VP (VBD left)) (. .))")
    scores = parseval([gold, gold, gold], [good, None, tree("(S (XX Jane) (XX left))")])
    assert (scores["sentences"], scores["error_sentences"], scores["skipped_sentences"]) == (3, 1, 1)
    assert (scores["gold_brackets"], scores["f1"]) == (3, pytest.approx(100.0))
