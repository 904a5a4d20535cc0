"""Documents: sentence splitting with Moses' rules, paragraphs and blank lines kept."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import sentence_splitter

from aiayn.decode import document
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


WORDS = ["el", "Sr.", "p.m.", "A.", "B", "casa", "¿Qué", "hizo?", "¡Hola!", '"Dijo."', "(Nota.)", "3", "1."]
WORDS += ["U.S.A.", "...", "e.g.", "Mr.", "no.", "12", "it.", "»", "«El", "'", '"', "?", "!", ".", "x" * 70]


@pytest.mark.parametrize("window", [3, document.WINDOW])
@pytest.mark.parametrize("language", ["en", "es", "de"])
def test_sentences_are_the_splitters_own_on_ordinary_text(monkeypatch, window, language):
    """Split WINDOW words at a time, a paragraph gets the sentences the splitter gives it whole."""
    monkeypatch.setattr(document, "WINDOW", window)
    rng = random.Random(window)
    splitter = document._splitter(language)
    for _ in range(400):
        text = " ".join(rng.choice(WORDS[:-1]) for _ in range(rng.randint(1, 30)))
        assert split_sentences(text, language) == [s for s in splitter.split(text) if s.strip()], text


class Recorder:
    """The splitter, checking that what it is given is bounded before it works on it."""

    def __init__(self, language: str):
        self.real, self.texts = document._splitter(language), []

    def split(self, text: str) -> list[str]:
        words = text.split()
        assert len(words) <= document.WINDOW + 2 * document.CONTEXT
        assert max(map(len, words)) <= 2 * document.WORD_ENDS + 1
        self.texts.append(text)
        return self.real.split(text)


@pytest.mark.parametrize(
    "text",
    [".", "a.", ". ", "a ", "A. "],
    ids=["dots", "a.a.", "dot space", "a space", "A. space"],
)
def test_the_splitter_gets_bounded_pieces_of_a_hostile_paragraph(monkeypatch, text):
    """Its regular expressions are quadratic in a word's length and its loop in a text's: 100,000
    characters of any kind reach it in pieces of bounded words of bounded length, so its work is
    linear; sentences keep the words whole."""
    recorder = Recorder("en")
    monkeypatch.setattr(document, "_splitter", lambda language: recorder)
    paragraph = text * (100_000 // len(text)) + " x y"
    sentences = split_sentences(paragraph, "en")
    assert " ".join(sentences).split() == paragraph.split()
    assert sum(map(len, recorder.texts)) <= 2 * len(paragraph)


def test_a_long_word_is_kept_whole_and_its_ends_still_decide():
    url = "https://example.org/" + "a" * 80
    assert split_sentences(f"See {url}. Then stop. Or e.g. {url}x. Go", "en") == [
        f"See {url}.",
        "Then stop.",
        f"Or e.g. {url}x.",
        "Go",
    ]


def test_no_non_breaking_prefix_is_as_long_as_a_long_words_ends():
    """What the splitter sees of a long word's end is longer than every prefix it looks up, so the
    cut never turns the end of a word into a prefix."""
    folder = Path(sentence_splitter.__file__).parent / "non_breaking_prefixes"
    for path in folder.glob("*.txt"):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert len(line.split("#")[0].strip()) < document.WORD_ENDS - 2, (path.name, line)


def test_paragraph_count_counts_paragraphs_with_words():
    assert document.paragraph_count("a\n\n\nb c.\n \t\n\n\u3000\n\nd") == 3
    assert document.paragraph_count("a\n\n\nb c.\n \t\n\n\u3000\n\nd", most=1) == 2  # stops past `most`
    assert document.paragraph_count("\n\n") == document.paragraph_count("") == 0
    text = "One. Two.\n\n \n\nThree.\n\n"
    assert document.paragraph_count(text) == len(split_document(text).shape) == 2


TRICKY = ["Sr.", "e.g.", "¿Qué?", "«Hola»", '"Yes."', "(A)", "1.", "3", "日本。", "😀.", "...", "a.b.",
          "U.S.", "\n\n", "\n", "ü.", "Él", "él", "the", "end.", "end!", "x" * 80 + ".", "“Quote”", "‘a’",
          "\t", "—"]  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_the_bounds_found_without_splitting_hold_for_the_split(seed):
    """bounds(): the longest word and the characters besides spaces exactly, and no more unbroken
    characters than the longest sentence that split_document finds (the server refuses on them
    before splitting, so a document they refuse is one the split would refuse too)."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(TRICKY) for _ in range(rng.randint(1, 400)))
    found, words = document.bounds(text), text.split()
    assert found.longest_word == max(map(len, words), default=0)
    assert found.solid == sum(map(len, words))
    sentences = split_document(text, rng.choice(["en", "es", "de"])).sentences
    assert found.unbroken <= max(map(len, sentences), default=0)


def test_bounds_count_what_no_sentence_end_can_cut():
    assert document.bounds(". " * 5000).unbroken == 5000  # no word may open a sentence
    assert document.bounds("a b. C d").unbroken == 3  # "a b." before the capital
    assert document.bounds("a b.\nc d").unbroken == 3  # a line break may end a paragraph
    assert document.bounds("").unbroken == document.bounds("").longest_word == 0
