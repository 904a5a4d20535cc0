"""LibreOffice's help as parallel text (aiayn.data.builtin.libreoffice): units read from the pages,
paired by id in either direction, counts and splits of the installed languages, missing packages
named."""

from __future__ import annotations

import pytest

from aiayn.data.builtin import CORPORA, load_builtin
from aiayn.data.builtin import libreoffice as libreoffice_module
from aiayn.data.builtin.sword import MissingPackageError


def _all_pairs(splits):
    return [pair for pairs in splits.values() for pair in pairs]


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
