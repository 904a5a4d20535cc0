"""translate_xliff on XLIFF 1.2 and 2.0 files with paired and standalone inline tags, a translated
unit, a translate="no" unit and a comment: every untranslated unit gets a target with the source's
inline tags (attributes as they were) around the same words, marked for review; the others are left
as they were; a file of another version, or not XML, is one line."""

from __future__ import annotations

from collections import Counter

import pytest
from lxml import etree
from word_models import Copier, Reverser

from aiayn.errors import AiaynError
from aiayn.formats.xliff import SUBSTATE, XliffError, translate_xliff

V12 = "urn:oasis:names:tc:xliff:document:1.2"
V20 = "urn:oasis:names:tc:xliff:document:2.0"
MESSAGES = ["the big house is here", "open the file", "the %s file is too large", "cannot read the directory"]


def units(version: str, messages: list[str]) -> str:
    """Units of MESSAGES with inline tags: the second word in a paired tag, a standalone tag at the end."""
    paired, alone = ("g", "x") if version == "1.2" else ("pc", "ph")
    out = []
    for k, message in enumerate(messages):
        words = message.split()
        words[1] = f'<{paired} id="p{k}" ctype="x-b">{words[1]}</{paired}>'
        source = " ".join(words) + f'<{alone} id="s{k}"/>'
        if version == "1.2":
            out.append(f'<trans-unit id="{k}"><source>{source}</source></trans-unit>')
        else:
            out.append(f'<unit id="{k}"><segment><source>{source}</source></segment></unit>')
    return "\n".join(out)


def document(version: str, messages: list[str] = MESSAGES) -> bytes:
    done, no = "<source>done</source>", "<source>keep this</source>"
    if version == "1.2":
        body = (
            f"{units(version, messages)}\n"
            f'<trans-unit id="done">{done}<target state="translated">fertig</target></trans-unit>\n'
            f'<trans-unit id="no" translate="no">{no}</trans-unit>'
        )
        text = f'<xliff version="1.2" xmlns="{V12}">'
        text += '<file source-language="en" datatype="plaintext" original="a">'
        text += f"<body>\n<!-- a comment -->\n{body}\n</body></file></xliff>"
    else:
        body = (
            f"{units(version, messages)}\n"
            f'<unit id="done"><segment state="final">{done}<target>fertig</target></segment></unit>\n'
            f'<unit id="no" translate="no"><segment>{no}</segment></unit>'
        )
        text = f'<xliff version="2.0" xmlns="{V20}" srcLang="en"><file id="f">{body}</file></xliff>'
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{text}\n'.encode()


def inline(element) -> Counter:
    return Counter(
        (etree.QName(e).localname, tuple(e.attrib.items())) for e in element.iter() if e is not element
    )


@pytest.mark.parametrize("version", ["1.2", "2.0"])
@pytest.mark.parametrize("model", [Copier, Reverser])
def test_untranslated_units_get_targets_with_their_tags(version, model):
    filled = translate_xliff(model(), document(version), "a.xlf")
    assert (filled.translated, filled.kept) == (len(MESSAGES), 1)
    root = etree.fromstring(filled.data)
    ns = {"x": V12 if version == "1.2" else V20}
    holders = root.findall(".//x:trans-unit" if version == "1.2" else ".//x:segment", ns)
    for holder in holders[: len(MESSAGES)]:
        source, target = holder.find("x:source", ns), holder.find("x:target", ns)
        assert inline(target) == inline(source)
        words = " ".join(source.itertext()).split()
        assert sorted(" ".join(target.itertext()).split()) == sorted(w.upper() for w in words)
        paired = [e for e in source if etree.QName(e).localname in ("g", "pc")][0]
        assert (
            "".join(target.find(f"x:{etree.QName(paired).localname}", ns).itertext()) == paired.text.upper()
        )
        if version == "1.2":
            assert (target.get("state"), target.get("state-qualifier")) == (
                "needs-review-translation",
                "mt-suggestion",
            )
        else:
            assert (holder.get("state"), holder.get("subState")) == ("translated", SUBSTATE)
    done, no = holders[len(MESSAGES) :]
    assert done.find("x:target", ns).text == "fertig" and no.find("x:target", ns) is None
    if version == "2.0":
        assert root.get("trgLang") == "de"
    else:
        assert b"<!-- a comment -->" in filled.data


def test_the_toy_translator_keeps_the_tags(translator):
    from aiayn.decode.texts import translate_texts

    messages = ["el perro come agua", "la luna grande duerme"]
    spanish = document("1.2", messages).replace(b'source-language="en"', b'source-language="es"')
    filled = translate_xliff(translator, spanish, "a.xlf")
    root = etree.fromstring(filled.data)
    found = [u for u in root.iter(f"{{{V12}}}trans-unit") if u.get("id") in ("0", "1")]
    for unit, plain in zip(found, translate_texts(translator, messages), strict=True):
        target = unit.find(f"{{{V12}}}target")
        assert inline(target) == inline(unit.find(f"{{{V12}}}source"))
        assert "".join(target.itertext()).split() == plain.split()


@pytest.mark.parametrize(
    "text, message",
    [
        (
            b'<xliff version="3.0"/>',
            r"^a\.xlf:1: XLIFF version '3\.0': aiayn reads 1\.0, 1\.1, 1\.2, 2\.0, 2\.1$",
        ),
        (b"<html/>", r"^a\.xlf: not an XLIFF file \(its root element is <html>\)$"),
        (b'<xliff version="1.2">\n<file>', r"^a\.xlf:2: not well-formed XML: "),
    ],
)
def test_a_file_aiayn_cannot_read_is_one_line(text, message):
    with pytest.raises(XliffError, match=message):
        translate_xliff(Copier(), text, "a.xlf")


SEGMENTED = (
    f'<xliff version="1.2" xmlns="{V12}">\n'
    '<file source-language="en" datatype="plaintext" original="a"><body><trans-unit id="s">\n'
    '<source>open the file. read <g id="1">the</g> directory.</source>\n'
    '<seg-source><mrk mtype="seg" mid="1">open the file.</mrk> '
    '<mrk mtype="seg" mid="2">read <g id="1">the</g>\ndirectory.</mrk><x id="2"/></seg-source>\n'
    "</trans-unit></body></file></xliff>"
).encode()


@pytest.mark.parametrize("model", [Copier, Reverser])
def test_a_segmented_source_gets_a_target_of_the_same_segments(model):
    translator = model()
    filled = translate_xliff(translator, SEGMENTED, "s.xlf")
    unit = etree.fromstring(filled.data).find(f".//{{{V12}}}trans-unit")
    seg_source, target = unit.find(f"{{{V12}}}seg-source"), unit.find(f"{{{V12}}}target")
    assert unit.index(target) == unit.index(seg_source) + 1
    assert inline(target) == inline(seg_source)  # the same <mrk mid>s, <g> and <x/>
    assert translator.calls == [["open the file.", "read the directory."]]  # each segment alone
    for mark in seg_source.iter(f"{{{V12}}}mrk"):
        made = target.find(f"{{{V12}}}mrk[@mid='{mark.get('mid')}']")
        words = "".join(mark.itertext()).split()
        assert "".join(made.itertext()).split() == [words[i].upper() for i in translator.order(len(words))]
    assert target[0].tail == " " and etree.QName(target[-1]).localname == "x"


@pytest.mark.parametrize(
    "declared, to, message",
    [
        ('source-language="es"', None, "source language is es; the model translates from en"),
        ('target-language="fr"', None, "target language is fr; the model translates into de"),
        ('target-language="de"', "fr", "target language is de; --to fr"),
        ('target-language="de-AT"', None, None),
    ],
)
def test_the_file_languages_must_be_the_translation_languages(declared, to, message):
    declared = declared if "source" in declared else f'source-language="en-US" {declared}'
    data = document("1.2").replace(b'source-language="en"', declared.encode())
    if message is None:
        assert translate_xliff(Copier(), data, "a.xlf", target_language=to).translated == len(MESSAGES)
    else:
        with pytest.raises(AiaynError, match=rf"^a\.xlf: the file's {message}$"):
            translate_xliff(Copier(), data, "a.xlf", target_language=to)
    version_2 = document("2.0").replace(b'srcLang="en"', b'srcLang="en" trgLang="fr"')
    with pytest.raises(AiaynError, match=r"target language is fr; the model translates into de$"):
        translate_xliff(Copier(), version_2, "a.xlf")
