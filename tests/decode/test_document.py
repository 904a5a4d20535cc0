"""Documents: sentence splitting with Moses' rules, paragraphs and blank lines kept."""

from __future__ import annotations

import pytest

from aiayn.decode.document import join_document, split_document, split_sentences


def test_spanish_abbreviations_do_not_end_sentences():
    text = "El Sr. García llegó a las 3 p.m. a la casa. ¿Qué hizo? Comió."
    assert split_sentences(text, "es") == [
        "El Sr. García llegó a las 3 p.m. a la casa.",
        "¿Qué hizo?",
        "Comió.",
    ]


def test_an_unknown_language_falls_back_to_general_rules():
    assert split_sentences("One thing. Another one!", "xx") == ["One thing.", "Another one!"]


def test_paragraphs_and_blank_lines_survive_the_round_trip():
    text = "\nFirst one. Second\none.\n\n\nThird paragraph.\n  \nLast. Very last.\n"
    doc = split_document(text, "en")
    assert doc.sentences == ["First one.", "Second one.", "Third paragraph.", "Last.", "Very last."]
    assert doc.shape == [2, 1, 2]
    upper = [s.upper() for s in doc.sentences]
    assert (
        join_document(doc, upper) == "\nFIRST ONE. SECOND ONE.\n\n\nTHIRD PARAGRAPH.\n  \nLAST. VERY LAST.\n"
    )


@pytest.mark.parametrize("text", ["", "\n\n", "   "])
def test_empty_documents(text):
    doc = split_document(text)
    assert doc.sentences == [] and join_document(doc, []).strip() == ""


def test_a_translation_count_mismatch_is_refused():
    with pytest.raises(ValueError, match="1 translations for 2 sentences"):
        join_document(split_document("One thing. Another."), ["x"])
