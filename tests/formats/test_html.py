"""translate_html on a golden set of HTML fragments: every output parses (its tags balanced where the
fragment's were), keeps the fragment's tags (each start tag byte for byte, with the same start tags
around it), comments and untranslated content, and translates the rest as plain text would be; on
translators whose word alignment is known (word for word, in order or reversed), every inline tag
holds exactly the words it held; on the toy translator, the words are its plain translation."""

from __future__ import annotations

from collections import Counter

import pytest
from html_checks import Page
from word_models import Copier, Reverser

from aiayn.decode.texts import translate_texts
from aiayn.formats.html import HtmlError, translate_html

# (fragment, what it is): "malformed" tags are kept but not nested as they were; "sentences" has a
# tag across two sentences (the reversing translator reverses each sentence on its own); "glued" has
# two tags in one word (the word goes into the first, the second is left empty).
FRAGMENTS = [
    ("el <b>perro</b> come", ""),
    ("<p>el <b>perro</b> come <i>agua</i></p>", ""),
    ("<p>la <b><i>luna</i> grande</b> duerme</p>", ""),
    ('<p><a href="https://example.org/?a=1&amp;b=2" title="el sol" class=x>el sol</a> mira la luna</p>', ""),
    ("<p>el gato &amp; el perro</p>", ""),
    ("<p>el gato&nbsp;come agua</p>", ""),
    ("<p>el perro<br>la luna</p>", ""),
    ("<p>el perro<br/>la luna</p>", ""),
    ("<p>el <!-- un comentario --> gato come</p>", ""),
    ("<p>el gato come <code>el perro</code></p>", ""),
    ("<pre>el gato <b>come</b></pre><p>el sol</p>", ""),
    ('<script>var el = "gato <b>";</script><p>la luna</p>', ""),
    ("<style>b { color: red }</style><p>la <b>luna</b></p>", ""),
    ("<ul><li>el gato</li><li>la <em>casa</em> grande</li></ul>", ""),
    ("<table><tr><td>el sol</td><td>la <strong>luna</strong></td></tr></table>", ""),
    ("<div>el perro <p>come agua</p> la luna</div>", ""),
    ("<h1>el <span class=\"x\" data-a='1'>gato</span></h1>", ""),
    ('<p><img src="a.png" alt="el gato"> el gato duerme</p>', ""),
    ('<p>el gato duerme <img src="a.png" alt="x"></p>', ""),
    ('<p>un <a href="#x"><b>gato</b> verde</a> bebe agua</p>', ""),
    ("<p>el <b>gato</b><i>perro</i> come</p>", "glued"),
    ('<p>el <span translate="no">gato verde</span> come</p>', ""),
    ('<p>el <span class="notranslate">perro</span> bebe</p>', ""),
    ("<P>el <B>gato</B></P>", ""),
    ('<p>la <a name="top"></a>luna duerme</p>', ""),
    ("<p>el <b> </b>sol</p>", ""),
    ("<p>el &lt;gato&gt; come</p>", ""),
    ("<p>el gato &eacute; &#233; &#xe9; &copy; come</p>", ""),
    ("<p>el <b>perro <i>come <u>agua</u></i></b> verde</p>", ""),
    ("<p>\n  el perro\n  come agua\n</p>", ""),
    ("<div><p>el sol</p>\n<p>la luna</p></div>", ""),
    ("<p>el gato come. La luna duerme.</p>", ""),
    ("<p>el <b>gato come. La luna</b> duerme.</p>", "sentences"),
    ("<p>el <sup>1</sup> gato</p>", ""),
    ("<p>el <kbd>gato</kbd> come</p>", ""),
    ("<p>el <textarea>el gato</textarea> perro</p>", ""),
    ('<p>la <abbr title="el sol">luna</abbr> mira</p>', ""),
    ('<p>el gato <input type="text" value="el"> come</p>', ""),
    ('<p>el <q cite="x">perro</q> bebe</p>', ""),
    ('<p>el <font color="red">sol</font> grande</p>', ""),
    ("el gato", ""),
    ("", ""),
    ("<p></p>", ""),
    ("<p>el gato <wbr>come</p>", ""),
    ("<p>el <a href='a\"b'>perro</a> come</p>", ""),
    ("<p>el <a href=x.html>perro</a> come</p>", ""),
    ('<p>el <svg width="1"><text>el gato</text></svg> sol</p>', ""),
    ('<p>la <time datetime="2020-01-01">luna</time></p>', ""),
    ('<?xml-stylesheet href="a"?><!DOCTYPE html><p>el sol</p>', ""),
    ('<html><head><title>el sol</title><meta charset="utf-8"></head><body><p>la luna</p></body></html>', ""),
    ("<p>el <b>perro</p><p>come</p>", "malformed"),
    ("<p>el <b><i>perro</b> come</i></p>", "malformed"),
    ("<p>el perro</span> come</p>", "malformed"),
    ("<p>el perro < el gato</p>", ""),
]
WELL_FORMED = [f for f, kind in FRAGMENTS if kind != "malformed"]


def same_markup(source: Page, output: Page, nested: bool) -> None:
    """The output has the source's tags (as written) and other markup; `nested`: around the same tags."""
    if nested:
        assert output.tags == source.tags
        assert output.balanced
    else:
        assert Counter(raw for _, raw in output.tags.elements()) == Counter(
            raw for _, raw in source.tags.elements()
        )
    assert output.ends == source.ends
    assert output.other == source.other
    assert output.kept == source.kept  # untranslated content as it was


@pytest.mark.parametrize("fragment, kind", FRAGMENTS)
def test_the_copying_translator_keeps_tags_around_their_words(fragment, kind):
    output = translate_html(Copier(), fragment)
    source, found = Page(fragment), Page(output)
    same_markup(source, found, nested=kind != "malformed")
    assert [w for w, _ in found.words] == [w.upper() for w, _ in source.words]
    if kind in ("", "sentences"):
        for _, raw in source.tags:
            assert found.inside(raw) == source.inside(raw), raw


@pytest.mark.parametrize("fragment, kind", FRAGMENTS)
def test_the_reversing_translator_moves_tags_with_their_words(fragment, kind):
    output = translate_html(Reverser(), fragment)
    source, found = Page(fragment), Page(output)
    same_markup(source, found, nested=kind != "malformed")
    assert Counter(w for w, _ in found.words) == Counter(w.upper() for w, _ in source.words)
    if not kind:
        for _, raw in source.tags:
            assert found.inside(raw) == source.inside(raw), raw


@pytest.mark.parametrize(
    "fragment, expected",
    [
        ("<p>the <b>big</b> house</p>", "<p>HOUSE <b>BIG</b> THE</p>"),
        (
            '<p>a <a href="x?a=1&amp;b=2">big <i>red</i> house</a>.</p>',
            '<p><a href="x?a=1&amp;b=2">HOUSE. <i>RED</i> BIG</a> A</p>',
        ),
        ("<p>one<br>two three</p>", "<p>THREE TWO<br>ONE</p>"),
        ("<p>  Tom &amp; Jerry &copy;\n</p>", "<p>  &copy; JERRY &amp; TOM\n</p>"),
        ("<p>run <code>ls -l</code> now</p>", "<p>NOW <code>ls -l</code> RUN</p>"),
        ("<p>big<b>ger</b> one</p>", "<p>ONE <b>BIGGER</b></p>"),
        ("<p>a <b>b <!-- c --> d</b></p>", "<p><b>D <!-- c --> B</b> A</p>"),
    ],
)
def test_exact_placements_of_the_reversing_translator(fragment, expected):
    assert translate_html(Reverser(), fragment) == expected


def test_a_tag_split_by_the_translation_keeps_its_longest_run():
    class Shuffler(Copier):  # "a b c" -> "A C B": <b>'s words are no longer together
        def order(self, n):
            return [0, 2, 1] if n == 3 else list(range(n))

    assert translate_html(Shuffler(), "<p><b>a b</b> c</p>") == "<p><b>A</b> C B</p>"
    assert translate_html(Shuffler(), "<p>a <b>b c</b></p>") == "<p>A <b>C B</b></p>"


def test_blocks_are_units_and_units_are_split_into_sentences():
    copier = Copier()
    translate_html(copier, "<div>un gato <p>el sol. La luna.</p> el perro<br>come</div>")
    assert copier.calls == [["un gato", "el sol.", "La luna.", "el perro come"]]


@pytest.mark.parametrize(
    "page, where",
    [
        ("<p>el <a href='y>z", "line 1, column 7"),
        ("<p>el\n<!-- gato", "line 2, column 1"),
        ("a <b", "line 1, column 3"),
    ],
)
def test_a_tag_that_never_ends_is_one_error(page, where):
    with pytest.raises(HtmlError, match=f"^{where}: .* opens a tag or comment that never ends$"):
        translate_html(Copier(), page)


def test_the_toy_translator_gives_its_plain_translation_with_the_tags_kept(translator):
    """Each fragment's sentences (as translate_html gives them to a translator) translated as plain
    text, all fragments' in one call (each sentence's translation is its own; one call saves a
    search per fragment), against the fragment translated by translate_html."""
    sentences = {}
    for fragment in WELL_FORMED:
        recorder = Copier()
        translate_html(recorder, fragment)
        sentences[fragment] = [s for call in recorder.calls for s in call]
    everything = [s for fragment in WELL_FORMED for s in sentences[fragment]]
    translations = iter(translate_texts(translator, everything))
    for fragment in WELL_FORMED:
        plain = [next(translations) for _ in sentences[fragment]]
        output = translate_html(translator, fragment)
        source, found = Page(fragment), Page(output)
        same_markup(source, found, nested=True)
        assert [w for w, _ in found.words] == [w for text in plain for w in text.split()], fragment


def test_the_toy_translator_puts_tags_around_the_right_words(translator):
    """Word-for-word sentences of the toy language, one word in <b>: the toy's alignments (AER under
    0.2) put the tag around that word's translation."""
    from toy import LEXICON

    cases = [("el perro come agua", 1), ("la luna mira un gato", 1), ("el sol grande duerme", 2),
             ("un gato bebe agua verde", 3), ("la casa verde", 2), ("el gato mira la luna", 4),
             ("una luna grande", 1), ("el perro duerme", 2), ("el gato come", 0),
             ("la luna bebe agua", 3)]  # fmt: skip
    right = 0
    for sentence, k in cases:
        words = sentence.split()
        words[k] = f"<b>{words[k]}</b>"
        found = Page(translate_html(translator, f"<p>{' '.join(words)}</p>"))
        right += found.inside("<b>") == Counter([LEXICON[sentence.split()[k]]])
    assert right >= 8
