"""The cleaning rules: which pair each removes, in order, and the language identifier's checks."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from aiayn.data.cleaning import RULES, Cleaning, LanguageCheck, decide, letters, per_source, write_samples
from aiayn.errors import AiaynError

PAIRS = [
    ("El señor es mi pastor; nada me faltará.", "The LORD is my shepherd; I shall not want."),  # kept
    ("El señor es mi pastor; nada me faltará.", "The LORD is my shepherd; I shall not want."),  # duplicate
    ("el Señor es mi pastor, nada me faltará", "the lord is my shepherd - I shall not want"),  # near
    ("Capítulo 3", "Chapter 3"),  # kept: digits count, too short to judge its language
    ("Capítulo 4", "Chapter 4"),  # kept
    ("Hello World", "hello   world"),  # a copy
    (
        "Der Herr ist mein Hirte, mir wird nichts mangeln.",
        "The LORD is my shepherd and nothing else.",
    ),  # language
    (
        "En el principio creó Dios los cielos y la tierra.",
        "En el principio creó Dios los cielos y la tierra!",
    ),
]  # the last: a Spanish target (the wrong language; not a copy, its punctuation differs)


def _decide(cleaning: Cleaning | None = None, pairs=PAIRS):
    cleaning = cleaning or Cleaning()
    return decide(iter(pairs), len(pairs), cleaning, LanguageCheck("es", "en", cleaning.min_chars))


def test_each_rule_removes_its_pairs_and_the_first_rule_wins():
    reasons = _decide()
    names = ["kept", *RULES]
    assert [names[r] for r in reasons] == [
        "kept", "duplicates", "near_duplicates", "kept", "kept", "copies", "language", "language"
    ]  # fmt: skip


def test_only_the_rules_asked_for_run():
    reasons = _decide(Cleaning(rules=("near_duplicates",)))
    assert [int(r) for r in reasons] == [0, 2, 2, 0, 0, 0, 0, 0]  # the exact one counts as near here
    assert not _decide(Cleaning(rules=("language",), min_chars=1000)).any()  # nothing long enough to judge


def test_letters_ignore_case_punctuation_and_spaces():
    assert letters("¡Hola,  MUNDO 2!") == letters("hola mundo 2") == "holamundo2"


def test_the_identifier_must_know_the_languages():
    with pytest.raises(AiaynError, match="cannot identify tgt_lang='tgt'"):
        LanguageCheck("es", "tgt", 20)
    assert LanguageCheck("pt-BR", "en_US", 20).expected == ["pt", "en"]


def test_a_missing_identifier_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "py3langid.langid", None)
    with pytest.raises(AiaynError, match="needs the py3langid package"):
        LanguageCheck("es", "en", 20)


def test_samples_name_the_source_and_pair(tmp_path):
    reasons = _decide()
    corpus = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=np.uint8)
    write_samples(tmp_path, reasons, iter(PAIRS), ["a", "b"], corpus, sample=1)
    assert np.array_equal(np.load(tmp_path / "reasons.npy"), reasons)
    assert (tmp_path / "language.tsv").read_text(encoding="utf-8").splitlines() == [
        "b\t3\t" + "\t".join(PAIRS[6])  # the first language removal only (sample=1): b's third pair
    ]
    assert not (tmp_path / "ratio.tsv").exists()
    assert per_source(reasons, corpus, ["a", "b"])["b"] == {
        "duplicates": 0, "near_duplicates": 0, "copies": 1, "language": 2, "score": 0
    }  # fmt: skip


def test_a_target_language_tag_hides_no_copy_or_near_duplicate():
    pairs = [(">>de<< Hello brave new world", "hello brave new  world"), ("Hallo Welt", "hallo, welt"),
             (">>de<< hallo welt", "Hallo Welt!")]  # fmt: skip
    reasons = decide(iter(pairs), 3, Cleaning(rules=("near_duplicates", "copies")), None)
    assert [RULES[r - 1] if r else "kept" for r in reasons] == ["copies", "kept", "near_duplicates"]
