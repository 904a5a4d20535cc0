"""Data recipes: several weighted corpora and the cleaning rules, every error one line with its place."""

from __future__ import annotations

import pytest

from aiayn.data.cleaning import DEFAULT_RULES, Cleaning
from aiayn.data.recipe import load_recipe
from aiayn.errors import AiaynError


def _write(tmp_path, text: str):
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sources_weights_and_files_relative_to_the_recipe(tmp_path):
    path = _write(
        tmp_path,
        "src_lang: es\ntgt_lang: en\nsources:\n  - corpus: bible-es-en\n"
        "  - {name: crawl, src: c.es, tgt: c.en, weight: 0.5}\n  - {tsv: more.tsv, weight: 3}\n"
        "test: {tsv: t.tsv}\nclean: [duplicates, copies]\n",
    )
    recipe = load_recipe(path)
    assert [s.name for s in recipe.sources] == ["bible-es-en", "crawl", "more"]
    assert [s.weight for s in recipe.sources] == [1.0, 0.5, 3.0]
    assert recipe.sources[0].corpus == "bible-es-en"
    assert (
        recipe.sources[1].files.src == tmp_path / "c.es"
        and recipe.sources[2].files.tsv == tmp_path / "more.tsv"
    )
    assert recipe.test.tsv == tmp_path / "t.tsv" and not recipe.valid.given
    assert recipe.clean == Cleaning(rules=("duplicates", "copies"))
    assert recipe.weighted and (recipe.src_lang, recipe.tgt_lang) == ("es", "en")
    described = recipe.describe()
    assert described["sources"][1] == {
        "name": "crawl", "weight": 0.5, "src": str(tmp_path / "c.es"), "tgt": str(tmp_path / "c.en"),
        "tgt_lang": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "sources:\n  - {corpus: bible-es-en, weight: -1}\n",
            "sources[0].weight: must be a positive number, got -1",
        ),
        ("sources:\n  - {corpus: bible-es-en, weight: 0}\n", "sources[0].weight: must be a positive number"),
        ("sources:\n  - {corpus: bible-es-en, weight: heavy}\n", "got 'heavy'"),
        ("sources:\n  - {corpus: bible-es-en, weight: true}\n", "got True"),
        ("sources:\n  - {corpus: bible-es-en, weight: .nan}\n", "got nan"),
        ("sources:\n  - {corpus: nope}\n", "sources[0].corpus: unknown corpus 'nope'"),
        ("sources:\n  - {src: a.es}\n", "sources[0]: give src and tgt files, or one tsv file"),
        (
            "sources:\n  - {corpus: bible-es-en, src: a.es, tgt: a.en}\n",
            "a built-in corpus or files, not both",
        ),
        ("sources:\n  - {corpus: bible-es-en, wieght: 2}\n", "sources[0]: unknown key 'wieght'"),
        ("sources:\n  - {tsv: a.tsv}\n  - {tsv: b/a.tsv}\n", "two sources are named 'a'"),
        ("sources:\n  - {tsv: a.tsv, name: 'bad name'}\n", "sources[0].name: must be letters"),
        ("sources: []\n", "sources: must be a non-empty list"),
        ("src_lang: Spanish\nsources:\n  - {tsv: a.tsv}\n", "src_lang: must be a language code"),
        ("sources:\n  - {tsv: a.tsv}\nclean: [dedup]\n", "clean: unknown cleaning rule 'dedup'"),
        ("sources:\n  - {tsv: a.tsv}\nclean: {min_chars: -2}\n", "clean: min_chars must be a whole number"),
        ("sources:\n  - {tsv: a.tsv}\nvalid: dev.tsv\n", "valid: must be a mapping"),
        ("sauces:\n  - {tsv: a.tsv}\n", "unknown key"),
        ("sources: [unclosed\n", "not a YAML recipe"),
        ("- just a list\n", "a recipe is a mapping"),
    ],
)
def test_bad_recipes_are_one_line_naming_the_file_and_entry(tmp_path, body, message):
    path = _write(tmp_path, body)
    with pytest.raises(AiaynError) as err:
        load_recipe(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text


def test_a_missing_recipe_is_one_line(tmp_path):
    with pytest.raises(AiaynError, match="cannot read the recipe"):
        load_recipe(tmp_path / "none.yaml")


def test_clean_values():
    assert Cleaning.parse(None) is None and Cleaning.parse(False) is None
    assert Cleaning.parse(True).rules == DEFAULT_RULES
    assert Cleaning.parse({"rules": ["language"], "min_chars": 5}) == Cleaning(("language",), 5)
    with pytest.raises(AiaynError, match="must be true, a list of rules"):
        Cleaning.parse("yes")
