"""The synthetic treebank: seeded, well-formed, with the phenomena it claims, held-out sentences new."""

from __future__ import annotations

import random
from collections import Counter

from aiayn.parse.grammar import LEXICON, MAX_WORDS, RULES, sample_sentence, synthetic_treebank
from aiayn.parse.trees import constituent_labels, normalise


def test_every_symbol_is_defined_and_has_a_non_recursive_rule():
    for symbol, rules in RULES.items():
        assert any(not recursive for _, _, recursive in rules), symbol
        for _, expansion, _ in rules:
            assert all(child in RULES or child in LEXICON for child in expansion), (symbol, expansion)


def test_seeded_sizes_and_held_out_sentences_unseen_in_train():
    sizes = {"train": 300, "valid": 40, "test": 40}
    first, again = synthetic_treebank(3, sizes), synthetic_treebank(3, sizes)
    assert {k: [str(t) for t in v] for k, v in first.items()} == {
        k: [str(t) for t in v] for k, v in again.items()
    }
    assert {k: len(v) for k, v in first.items()} == sizes
    assert [str(t) for t in synthetic_treebank(4, sizes)["train"]] != [str(t) for t in first["train"]]
    train = {" ".join(t.words()) for t in first["train"]}
    valid = [" ".join(t.words()) for t in first["valid"]]
    test = [" ".join(t.words()) for t in first["test"]]
    assert not train & set(valid) and not train & set(test) and not set(valid) & set(test)
    assert len(set(test)) == len(test)


def test_trees_are_normal_ptb_trees_with_recursion_attachment_and_coordination():
    rng = random.Random(0)
    trees = [sample_sentence(rng) for _ in range(2000)]
    assert all(1 <= len(t.words()) <= MAX_WORDS for t in trees)
    assert all(str(normalise(t)) == str(t) for t in trees[:200])  # nothing to normalise away
    labels = Counter(label for t in trees for label in constituent_labels(t))
    assert set(labels) == {"S", "NP", "VP", "PP", "SBAR", "WHNP", "ADJP", "ADVP", "PRT"}
    text = [str(t) for t in trees]
    assert any("(SBAR (WHNP" in s and "(S (VP" in s for s in text)  # subject relative clauses
    assert any("(NP (NP" in s and "(PP (IN with)" in s for s in text)  # PP attached to a noun
    assert any("(VP (VBD saw)" in s and "(PP (IN with)" in s for s in text)
    assert any(s.startswith("(S (S ") and "(, ,) (CC" in s for s in text)  # coordinated clauses
    assert max(s.count("(SBAR") for s in text) >= 2  # recursion: clauses inside clauses
