"""Inline markup carried through a word alignment (aiayn.formats.inline), on hand-built trees: the
words the model reads, markup around the aligned target words, atoms between neighbours with their
white space, a span kept once around its longest run, unaligned words following the one before."""

from __future__ import annotations

from aiayn.formats.inline import Atom, Span, carry, source_layout


def carried(root: Span, words: list[str], pairs: list[tuple[int, int]]) -> list:
    return carry(root, source_layout(root), words, pairs).children


def test_a_word_split_by_markup_is_one_word_in_the_span():
    bold = Span("b", ["ger"])
    layout = source_layout(Span(None, ["big", bold, " cat"]))
    assert layout.words == ["bigger", "cat"]
    assert layout.paths == [(bold,), ()]


def test_a_span_goes_around_the_target_of_its_source_word_and_the_edges_keep_their_space():
    root = Span(None, [" the ", Span("b", ["red"]), " car "])
    out = carried(root, ["la", "voiture", "rouge"], [(0, 0), (2, 1), (1, 2)])
    assert out[:5] == [" ", "la", " ", "voiture", " "] and out[6:] == [" "]
    assert (out[5].payload, out[5].children) == ("b", ["rouge"])


def test_atoms_keep_the_white_space_they_had():
    code = Atom("%d")
    assert carried(Span(None, [code, " files"]), ["Dateien"], [(0, 0)]) == [code, " ", "Dateien"]
    code = Atom("%s")
    assert carried(Span(None, ["file", code]), ["Datei"], [(0, 0)]) == ["Datei", code]


def test_a_span_keeps_its_longest_run_and_unaligned_words_follow_the_word_before():
    bold = Span("b", ["a b"])
    out = carried(Span(None, [bold, " c"]), ["x", "z", "y"], [(0, 0), (2, 1), (1, 2)])  # b's words: x, y
    assert [(n.payload, n.children) if isinstance(n, Span) else n for n in out] == [
        ("b", ["x"]), " ", "z", " ", "y"
    ]  # fmt: skip
    out = carried(Span(None, [bold, " c"]), ["x", "w", "z"], [(0, 0), (2, 2)])  # w: unaligned, after x
    assert [(n.payload, n.children) if isinstance(n, Span) else n for n in out] == [
        ("b", ["x", " ", "w"]),
        " ",
        "z",
    ]


def test_a_segment_without_words_comes_back_as_it_was():
    root = Span(None, [Atom("<br>")])
    assert carry(root, source_layout(root), [], []) is root
