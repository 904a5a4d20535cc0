"""Segments with markup (aiayn.formats.segments): cut into the sentences the model reads, their
translations joined back per segment with the markup carried through each sentence's alignment."""

from __future__ import annotations

from types import SimpleNamespace

from aiayn.decode.texts import translate_texts
from aiayn.formats.inline import Atom, Span
from aiayn.formats.segments import carry_segments, plan_segments, translate_segments


def words_of(node) -> list[str]:
    """The words of a tree, in order."""
    if isinstance(node, str):
        return node.split()
    if isinstance(node, Atom):
        return []
    return [w for child in node.children for w in words_of(child)]


def test_segments_are_cut_into_sentences_each_owned_by_its_segment():
    first = Span(None, ["El ", Span("b", ["gato"]), " come. La casa es grande."])
    plan = plan_segments([first, Span(None, [Atom("br")]), Span(None, ["Hola."])], "es")
    assert plan.sentences == ["El gato come.", "La casa es grande.", "Hola."]
    assert plan.owners == [0, 0, 2]


def test_markup_follows_the_alignment_of_its_own_sentence():
    bold = Span("b", ["casa"])  # source word 1 of the segment's second sentence
    wordless = Span(None, [Atom("br")])
    plan = plan_segments([Span(None, ["El gato come. La ", bold, " es grande."]), wordless], "es")
    best = [
        SimpleNamespace(text="The cat eats.", alignment=[(0, 0), (1, 1), (2, 2)]),
        # "Big is the house.": la->the, casa->house., es->is, grande->Big; (9, 9) is out of range
        SimpleNamespace(text="Big is the house.", alignment=[(0, 2), (1, 3), (2, 1), (3, 0), (9, 9)]),
    ]
    target, kept = carry_segments(plan, best)
    assert words_of(target) == ["The", "cat", "eats.", "Big", "is", "the", "house."]
    (carried,) = [child for child in target.children if isinstance(child, Span)]
    assert carried.payload == "b" and carried.children == ["house."]
    assert kept is wordless  # a segment without words comes back as it was


def test_the_segments_of_a_file_read_as_the_translator_translates_their_sentences(translator):
    roots = [Span(None, ["el perro come. ", Span("i", ["la casa"]), " es grande."]), Span(None, ["el gato"])]
    targets = translate_segments(translator, roots, beam_size=2)
    expected = translate_texts(translator, ["el perro come.", "la casa es grande.", "el gato"], beam_size=2)
    assert [" ".join(words_of(t)) for t in targets] == [" ".join(expected[:2]), expected[2]]
