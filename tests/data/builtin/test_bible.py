"""The Bibles read from Debian's SWORD modules (aiayn.data.builtin.bible): counts, cleaning, splits
and the alignment checks (figures: README, Data)."""

from __future__ import annotations

import re

import pytest

from aiayn.data.builtin import bible as bible_module
from aiayn.data.builtin import load_builtin, sword
from aiayn.data.builtin.bible import aligned_chapters, lower_drop_cap
from aiayn.data.builtin.sword import clean_osis

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
