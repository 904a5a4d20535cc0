"""The built-in corpora read from Debian packages: counts, cleaning and alignment (figures: README, Data)."""

from __future__ import annotations

import re

import pytest

from aiayn.data.builtin import CORPORA, get_corpus, load_builtin, sword
from aiayn.data.builtin import bible as bible_module
from aiayn.data.builtin import libreoffice as libreoffice_module
from aiayn.data.builtin.bible import aligned_chapters, lower_drop_cap
from aiayn.data.builtin.sword import MissingPackageError, clean_osis
from aiayn.errors import AiaynError

# measured on es-KJV when the loaders were written (README, Data)
DATA_MD = {"train": 28_875, "valid": 544, "test": 938}
GENESIS_1_1 = (
    "En el principio crió Dios los cielos y la tierra.",
    "In the beginning God created the heaven and the earth.",
)


def _all_pairs(splits):
    return [pair for pairs in splits.values() for pair in pairs]


def test_bible_counts_match_data_md(bible):
    for split, expected in DATA_MD.items():
        assert abs(len(bible[split]) - expected) <= 0.03 * expected, (split, len(bible[split]))


def test_bible_genesis_1_1_with_drop_cap_lowered(bible):
    assert bible["train"][0] == GENESIS_1_1


def test_bible_text_has_no_markup_left(bible):
    for source, target in _all_pairs(bible):
        for text in (source, target):
            assert "¶" not in text and "\\" not in text and "<" not in text and "&" not in text, text
            assert text == " ".join(text.split()) and text


def test_bible_no_glued_words(bible):
    text = " ".join(s + " " + t for s, t in _all_pairs(bible))
    for glued in ("engendróun", "Godcreated", "bornSon"):
        assert glued not in text
    assert not re.findall(r"\b\w*[a-zñáéíóú][A-ZÑÁÉÍÓÚ]\w*", text)  # "bornSon": a word glued to a capital
    sources = {s for s, _ in _all_pairs(bible)}
    assert any("engendró un hijo á su semejanza" in s for s in sources)  # Gen 5:3, <transChange> cut
    assert any("preguntándole," in s for s in sources)  # 1 Chr 10:13, an enclitic stays one word
    assert any("enviada por medio de Febe" in s for s in sources)  # Rom 16:27


def test_bible_splits_are_whole_books_without_leaks(bible):
    train_sources = {s for s, _ in bible["train"]}
    assert not train_sources & {s for s, _ in bible["valid"] + bible["test"]}
    # Ruth 1:1 opens the dev set, Esther 1:1 the test set (drop cap lowered there too)
    assert bible["valid"][0][0].startswith("Y aconteció en los días que gobernaban los jueces")
    assert bible["test"][0][0].startswith("Y aconteció en los días de Assuero")


def test_bible_misaligned_chapters_are_dropped(bible):
    sources = {s for s, _ in _all_pairs(bible)}
    spanish = {ref: clean_osis(raw) for ref, raw in sword.read_module(*bible_module.SOURCE).items()}
    # Num 13 follows the empty Num 12:16 and is shifted; Jonah 1:17 is empty; 1 Kgs 22 shifts from v43
    for ref in [("Num", 13, 27), ("Jonah", 1, 3), ("Jonah", 2, 2), ("1Kgs", 22, 45), ("1Chr", 21, 5)]:
        assert list(spanish.values()).count(spanish[ref]) == 1
        assert spanish[ref] not in sources, ref
    assert spanish[("Num", 14, 27)] in sources


def test_alignment_checks_on_a_synthetic_bible():
    def chapter(book, number, lengths, empty_last=False):
        verses = [((book, number, v + 1), "x" * a, "y" * b) for v, (a, b) in enumerate(lengths)]
        if empty_last:
            verses[-1] = (verses[-1][0], "", verses[-1][2])
        return verses

    good = [(50, 50), (80, 80), (30, 30), (60, 60), (40, 40), (70, 70)] * 3
    shifted = good[:15] + [(30, 80), (60, 30), (40, 60)]  # one verse off from verse 16 on
    chapters = [
        chapter("Gen", 1, good),
        chapter("Gen", 2, good, empty_last=True),
        chapter("Gen", 3, good),  # after a chapter that ends empty
        chapter("Gen", 4, shifted),
        chapter("Gen", 5, [(a * 2, b) for a, b in good]),  # twice as long throughout
        *[chapter("Gen", n, good) for n in range(6, 12)],
    ]
    kept, dropped = aligned_chapters(chapters)
    assert [c[0][0][1] for c in kept] == [1, *range(6, 12)]
    assert dropped == {"empty_source_verse": 1, "after_empty_end": 1, "length_ratio": 1, "shifted": 1}


@pytest.mark.slow
def test_bible_web_target():
    if not sword.SWORD_ROOT.is_dir():
        pytest.skip("no SWORD modules")
    splits = load_builtin("bible-es-en-web")
    assert splits["train"][0] == (GENESIS_1_1[0], "In the beginning, God created the heavens and the earth.")
    assert abs(len(splits["train"]) - DATA_MD["train"]) <= 0.03 * DATA_MD["train"]
    assert max(len(t) for _, t in _all_pairs(splits)) < 1000  # no 26 KB glossary in Rev 22:21
    assert not any(t.split()[0] == "Beloved" for _, t in splits["train"] if t)  # no speaker labels


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ('<w lemma="x">EN el principio</w> <w lemma="y">crió</w>. ', "EN el principio crió."),
        (
            '<w>y engendró</w><transChange type="added">un hijo</transChange><w>á su</w>',
            "y engendró un hijo á su",
        ),
        ('preguntándo<transChange type="added">le</transChange>, <w>y</w>', "preguntándole, y"),
        ('<w>God</w><note placement="foot">The Hebrew word</note><w>created</w>', "God created"),
        ("<w>give</w>n.", "given."),
        ("¶ And <divineName>LORD</divineName> \\nd <w>JEHOVAH</w>", "And LORD JEHOVAH"),
        ('<title type="psalm">A Psalm of David.</title><l sID="1"/>LORD, how', "A Psalm of David. LORD, how"),
        ("<speaker>Beloved</speaker> <l/>Let him kiss me &amp; go", "Let him kiss me & go"),
        ('Amen.<div type="glossary"/> Aaron: the brother of Moses', "Amen."),
    ],
)
def test_clean_osis(raw, clean):
    assert clean_osis(raw) == clean


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("EN el principio crió", "En el principio crió"),
        ("Y ACONTECIÓ en los días", "Y aconteció en los días"),
        ("DE SIETE años era Joas", "De siete años era Joas"),
        ("Salmo de David. ¡OH Jehová, cuánto", "Salmo de David. ¡Oh Jehová, cuánto"),
        ("ALEPH. BIENAVENTURADOS los perfectos", "ALEPH. Bienaventurados los perfectos"),
        ("Y El ángel de Jehová", "Y El ángel de Jehová"),
    ],
)
def test_lower_drop_cap(text, expected):
    assert lower_drop_cap(text) == expected


def test_missing_sword_package_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sword, "SWORD_ROOT", tmp_path)
    with pytest.raises(MissingPackageError, match="sword-text-sparv") as err:
        sword.read_module(*bible_module.SOURCE, root=tmp_path)
    assert "\n" not in str(err.value) and "apt-get install sword-text-sparv" in str(err.value)


def test_missing_libreoffice_package_names_it(tmp_path):
    (tmp_path / "en-US" / "text").mkdir(parents=True)
    with pytest.raises(MissingPackageError, match="libreoffice-help-de"):
        libreoffice_module.aligned_pairs(tmp_path)


def test_missing_spanish_libreoffice_help_names_it(tmp_path):
    (tmp_path / "en-US" / "text").mkdir(parents=True)
    with pytest.raises(MissingPackageError, match="apt-get install libreoffice-help-es"):
        libreoffice_module.aligned_pairs(tmp_path, source="es", target="en-US")


def test_libreoffice_pairs_align_in_either_direction(tmp_path):
    for language, text in (("en-US", "Open the file."), ("es", "Abra el archivo.")):
        (tmp_path / language / "text" / "shared").mkdir(parents=True)
        page = f'<p id="a">{text}</p><p id="b">LibreOffice</p><p id="c">42</p>'
        (tmp_path / language / "text" / "shared" / "page.html").write_text(page, encoding="utf-8")
    assert libreoffice_module.aligned_pairs(tmp_path, source="es", target="en-US") == [
        ("Abra el archivo.", "Open the file.")
    ]
    assert libreoffice_module.aligned_pairs(tmp_path, source="en-US", target="es") == [
        ("Open the file.", "Abra el archivo.")
    ]


@pytest.mark.slow
def test_libreoffice_spanish_english(help_pages_read_once):
    if not (libreoffice_module.HELP_ROOT / "es").is_dir():
        pytest.skip("libreoffice-help-es missing: run `make deb`")
    splits = load_builtin("libreoffice-es-en")
    pairs = _all_pairs(splits)
    assert abs(len(pairs) - 30_279) <= 0.05 * 30_279  # measured when the corpus was added
    assert 500 <= len(splits["valid"]) <= 1000 and 500 <= len(splits["test"]) <= 1000
    assert not {s for s, _ in splits["train"]} & {s for s, _ in splits["valid"] + splits["test"]}
    english = dict(pairs)
    assert english.get("Especifica opciones adicionales para todos los diccionarios.") == (
        "Specifies additional options for all dictionaries."
    )
    assert (CORPORA["libreoffice-es-en"].src_lang, CORPORA["libreoffice-es-en"].tgt_lang) == ("es", "en")


def test_unknown_corpus_lists_the_known_ones():
    with pytest.raises(
        AiaynError, match="bible-es-en, bible-es-en-web, libreoffice-en-de, libreoffice-es-en"
    ):
        get_corpus("wmt14")
    assert CORPORA["libreoffice-en-de"].src_lang == "en" and CORPORA["libreoffice-en-de"].tgt_lang == "de"


@pytest.mark.slow
def test_libreoffice_counts_and_alignment(libreoffice):
    pairs = _all_pairs(libreoffice)
    assert abs(len(pairs) - 35_916) <= 0.05 * 35_916  # DATA.md: 35,916 unique pairs
    assert len(set(pairs)) == len(pairs)
    assert 500 <= len(libreoffice["valid"]) <= 1000 and 500 <= len(libreoffice["test"]) <= 1000
    assert not {s for s, _ in libreoffice["train"]} & {
        s for s, _ in libreoffice["valid"] + libreoffice["test"]
    }
    german = dict(pairs)
    assert german.get("Scaling") == "Skalierung"
    assert not any("CommandCtrl" in s for s, _ in pairs)  # the macOS variant is skipped


def test_libreoffice_unit_parser(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        '<h1 id="h1">Title <span>here</span></h1><p id="p1">Press <span class="switchinline">'
        '<span hidden="true" id="MACx" class="MAC">Command</span><span hidden="true" id="defaultx">Ctrl'
        '</span></span>+A<br>now.</p><table><tr><td id="c1"><p id="p2">Cell</p></td></tr></table>'
        "<p>no id</p>",
        encoding="utf-8",
    )
    assert libreoffice_module.read_units(page) == {
        "h1": "Title here",
        "p1": "Press Ctrl+A now.",
        "p2": "Cell",
        "c1": "",
    }


def test_an_unknown_corpus_names_every_built_in_one():
    with pytest.raises(AiaynError) as caught:
        get_corpus("bible-es-eng")
    assert all(name in str(caught.value) for name in (*CORPORA, "synthetic-trees (parsing)"))


def test_english_to_spanish_and_french_help(libreoffice):
    for name, target in (("libreoffice-en-es", "es"), ("libreoffice-en-fr", "fr")):
        corpus = CORPORA[name]
        assert (corpus.src_lang, corpus.tgt_lang) == ("en", target)
        if not (libreoffice_module.HELP_ROOT / target).is_dir():
            pytest.skip(f"{libreoffice_module.HELP_ROOT / target} missing: run `make deb`")
        splits = load_builtin(name)
        english = {s for s, _ in libreoffice["train"]}  # the en-de corpus's English side
        assert len(splits["train"]) > 20_000 and len(splits["test"]) > 300
        assert sum(s in english for s, _ in splits["train"][:500]) > 400  # the same English paragraphs
        assert all(s != t for s, t in splits["train"][:500])
