"""Target-language tags at translate time (aiayn.decode.languages): the tag starts every source
the model reads, each part of a split text included, and it decides the output language."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from aiayn.decode.languages import chosen_target, required_target
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError, TextError
from toy import LEXICON, LEXICON_DE, word_for_word

TEXTS = [s for s, _ in word_for_word(30, seed=11)]


@pytest.fixture(scope="module")
def multilingual(toy_multilingual_model_dir) -> Translator:
    return Translator.load(toy_multilingual_model_dir, device="cpu")


def _seen_sources(translator: Translator, monkeypatch) -> list[list[int]]:
    """The source ids every later search is given, as the model reads them."""
    seen: list[list[int]] = []
    search = Translator.translate_ids

    def spy(self, sources, *args, **kwargs):
        seen.extend(sources)
        return search(self, sources, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate_ids", spy)
    return seen


def _share(outputs: list[str], lexicon: dict[str, str]) -> float:
    words = [w for out in outputs for w in out.split()]
    return sum(w in set(lexicon.values()) for w in words) / len(words)


def test_the_tag_decides_the_output_language(multilingual):
    for language, lexicon, other in (("de", LEXICON_DE, LEXICON), ("en", LEXICON, LEXICON_DE)):
        found = multilingual.translate_batch(TEXTS, beam_size=2, target_language=language)
        outputs = [t[0].text for t in found]
        assert _share(outputs, lexicon) > 0.95 and _share(outputs, other) < 0.05, (language, outputs)


def test_a_source_is_encoded_as_prepare_encodes_a_tagged_sentence(multilingual, monkeypatch):
    seen = _seen_sources(multilingual, monkeypatch)
    multilingual.translate_batch(TEXTS[:5], beam_size=1, target_language="de")
    tokenizer, eos = multilingual.tokenizer, multilingual.config.eos_id
    # aiayn prepare writes ">>de<< " before each source and encodes the line (aiayn.data.recipe)
    expected = [ids + [eos] for ids in tokenizer.encode([f">>de<< {t}" for t in TEXTS[:5]])]
    assert sorted(seen) == sorted(expected)


def test_every_part_of_a_split_text_starts_with_the_tag(multilingual, monkeypatch):
    text = " ".join(f"{s}." for s in TEXTS[:8])
    n = len(multilingual.encode([text])[0])
    info = {**multilingual.info, "longest_source": n // 6}  # a source limit far under the text
    short = Translator(replace(multilingual.bundle, info=info))
    seen = _seen_sources(short, monkeypatch)
    with pytest.warns(UserWarning, match="translated in"):
        (found,) = short.translate_batch([text], beam_size=1, target_language="de")
    tag = multilingual.tokenizer.encode([">>de<<"])[0]
    assert len(tag) >= 1 and ">>de<<" in multilingual.tokenizer.pieces(tag)
    assert len(seen) > 1
    for source in seen:
        assert source[: len(tag)] == tag and tag[-1] not in source[len(tag) :]
        assert len(source) <= 2 * (n // 6)  # the tag counted within the limit
    assert _share([found[0].text], LEXICON_DE) > 0.9


def test_texts_of_several_languages_share_one_call(multilingual):
    languages = ["de", "en"] * 3
    together = multilingual.translate_batch(TEXTS[:6], beam_size=2, target_language=languages)
    for text, language, found in zip(TEXTS[:6], languages, together, strict=True):
        (alone,) = multilingual.translate_batch([text], beam_size=2, target_language=language)
        assert found[0].text == alone[0].text


def test_alignment_counts_source_words_without_the_tag(multilingual):
    found = multilingual.translate_batch(TEXTS[:10], beam_size=1, target_language="en", align=True)
    for text, (t,) in zip(TEXTS[:10], found, strict=True):
        words = len(text.split())
        assert {i for i, _ in t.alignment} <= set(range(words))
        # word for word: the output word j comes from source word j (no shift by the tag)
        if len(t.text.split()) == words:
            assert sum(i == j for i, j in t.alignment) >= words - 1, (text, t.text, t.alignment)


def test_without_a_target_the_texts_carry_their_own_tags(multilingual):
    """A prepared data directory's test sources start with their tags (aiayn evaluate reads them)."""
    tagged = multilingual.translate_batch([f">>de<< {TEXTS[0]}"], beam_size=2)
    chosen = multilingual.translate_batch([TEXTS[0]], beam_size=2, target_language="de")
    assert tagged[0][0].text == chosen[0][0].text


def test_a_language_the_model_lacks_is_one_line(multilingual, translator):
    with pytest.raises(
        AiaynError, match=r"target_language fr: the model does not translate into it; it has de, en"
    ):
        multilingual.translate_batch(TEXTS[:2], target_language="fr")
    with pytest.raises(TextError, match=r"text 2: target_language xx"):
        multilingual.translate_batch(TEXTS[:2], target_language=["de", "xx"])
    with pytest.raises(AiaynError, match="2 entries for 3 texts"):
        multilingual.translate_batch(TEXTS[:3], target_language=["de", "en"])
    # the one-language toy (es -> en): its own language is no tag, any other is refused
    with pytest.raises(AiaynError, match=r"target_language de: this model translates into en only"):
        translator.translate_batch(TEXTS[:2], target_language="de")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = translator.translate_batch(TEXTS[:3], beam_size=2)
        own = translator.translate_batch(TEXTS[:3], beam_size=2, target_language="en")
    assert [t[0].text for t in own] == [t[0].text for t in plain]


def test_a_user_facing_command_must_choose_among_several():
    info = {"tgt_lang": "mul", "target_languages": ["de", "en"]}
    with pytest.raises(AiaynError, match=r"^the model translates into de, en: choose one with --to$"):
        required_target(info, None, "--to")
    assert required_target({"target_languages": ["de"]}, None, "--to") == "de"
    assert required_target({"tgt_lang": "en"}, None, "--to") is None
    assert chosen_target({**info, "target_tag": "<2{lang}>"}, "de", "--to") == "<2de>"
    with pytest.raises(AiaynError, match="has no target-language tags"):
        chosen_target({}, "de", "--to")
