"""Text conveniences (aiayn.decode.texts): strings, the best of translate_batch's results;
documents with their layout kept."""

from __future__ import annotations

from aiayn.config import DecodeConfig
from aiayn.decode.texts import translate_document, translate_texts


def test_a_document_keeps_its_paragraphs(translator):
    doc = "el perro come agua\n\nla luna\n\n\nel sol\n"  # sentence splitting: test_document.py
    one, two, three = translate_texts(translator, ["el perro come agua", "la luna", "el sol"], beam_size=2)
    assert translate_document(translator, doc, beam_size=2) == f"{one}\n\n{two}\n\n\n{three}\n"
    assert one == "the dog eats water"  # the toy translator has learnt its task


def test_the_strings_are_the_best_of_each_text_s_translations(translator):
    texts = ["el perro come agua", "", "la luna"]
    best = [found[0].text for found in translator.translate_batch(texts, beam_size=3, n_best=2)]
    assert translate_texts(translator, texts, beam_size=3, n_best=2) == best
    assert translate_texts(translator, texts, DecodeConfig(beam_size=3)) == best
    assert best[1] == ""
