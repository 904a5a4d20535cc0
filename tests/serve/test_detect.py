"""Language identification (aiayn.serve.detect) against py3langid's own normalised identifier."""

from __future__ import annotations

import pytest
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from aiayn.serve.detect import identify, probability

TEXTS = ["This is an English sentence for detection", "Esta es una frase en español", "   "]


@pytest.fixture(scope="module")
def reference():
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def test_each_text_gets_its_most_probable_languages_best_first(reference):
    found = identify(TEXTS, top=3)
    assert [ranked[0][0] for ranked in found[:2]] == ["en", "es"]
    for text, ranked in zip(TEXTS[:2], found, strict=False):
        expected = reference.rank(text)[:3]
        assert [lang for lang, _ in ranked] == [lang for lang, _ in expected]
        assert [p for _, p in ranked] == pytest.approx([float(p) for _, p in expected])
        assert all(0 <= p <= 1 for _, p in ranked)
    assert found[2] == []  # a blank text: no candidates


def test_the_probability_of_a_language_reads_its_base_code(reference):
    text = TEXTS[1]
    expected = float(dict(reference.rank(text))["es"])
    assert probability(text, "es") == pytest.approx(expected)
    assert probability(text, "ES-mx") == pytest.approx(expected)  # region and case left out
    assert probability(text, "xx") == 0.0  # a language the identifier does not know
    assert probability("  ", "es") == 0.0
