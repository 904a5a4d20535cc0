"""Texts to sources: long texts split, never cut; prefixes and constraints checked per text."""

from __future__ import annotations

import pytest

from aiayn.decode.inputs import source_units, target_constraints, target_prefixes
from aiayn.errors import AiaynError

EOS = 3


class WordTokenizer:
    """One id per whitespace word (10 + its length): enough to count tokens."""

    def encode(self, texts):
        return [[10 + len(w) for w in t.split()] for t in texts]


def test_a_text_over_the_limit_is_split_into_sentences_then_pieces():
    heard = []
    text = "One two three. " + " ".join(["w"] * 12) + "."
    (units,) = source_units([text], WordTokenizer(), 6, EOS, "en", lambda *a: heard.append(a))
    assert [len(u) for u in units] == [4, 6, 6, 3]  # 3 + EOS; 12 words in pieces of 5 (+ EOS)
    assert all(u[-1] == EOS for u in units) and sum(len(u) - 1 for u in units) == 3 + 12
    assert heard == [(0, 16, 6, 4)]


def test_lowercase_sentences_are_split_at_their_punctuation():
    text = "uno dos tres. cuatro cinco seis! siete ocho"  # Moses' rules want a capital after the stop
    (units,) = source_units([text], WordTokenizer(), 5, EOS, "es", lambda *a: None)
    assert [len(u) - 1 for u in units] == [3, 3, 2]


def test_short_and_empty_texts_are_one_source_or_none():
    units = source_units(["a b", "", "c"], WordTokenizer(), 6, EOS, "en", lambda *a: pytest.fail("split"))
    assert units == [[[11, 11, EOS]], [], [[11, EOS]]]


def test_prefixes_and_constraints_are_checked_per_text():
    encode = WordTokenizer().encode
    assert target_prefixes(None, 2, encode, 10) is None
    assert target_prefixes([None, ""], 2, encode, 10) is None
    assert target_prefixes(["ab c", None], 2, encode, 10) == [[12, 11], []]
    assert target_constraints([["ab"], None], 2, encode, 10) == [[[12]], []]
    with pytest.raises(AiaynError, match="prefix: 1 entries for 2 texts"):
        target_prefixes(["a"], 2, encode, 10)
    with pytest.raises(AiaynError, match="text 1: prefix: 3 tokens, over the output limit of 2"):
        target_prefixes(["a b c"], 1, encode, 2)
    with pytest.raises(AiaynError, match="text 1: constraint 2 is empty"):
        target_constraints([["a", " "]], 1, encode, 10)
    with pytest.raises(AiaynError, match="text 1: constraints: a list of phrases"):
        target_constraints(["a b"], 1, encode, 10)
    with pytest.raises(AiaynError, match="constraints: a string for 1 texts"):
        target_constraints("a", 1, encode, 10)
