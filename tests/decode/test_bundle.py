"""ModelBundle and load_bundle (what a model directory loads), Translator.translate_batch (always
Translations), the text conveniences on top, and the older Translator calls (deprecated, unchanged)."""

from __future__ import annotations

import warnings

import pytest

from aiayn.decode import (
    ModelBundle,
    Translation,
    Translator,
    load_bundle,
    translate_document,
    translate_texts,
)
from aiayn.errors import AiaynError

TEXTS = ["el gato come", "el perro bebe agua", ""]


@pytest.fixture(scope="module")
def bundle(toy_model_dir) -> ModelBundle:
    return load_bundle(toy_model_dir, device="cpu")


def test_a_bundle_holds_the_models_and_what_they_need(bundle, toy_model_dir):
    assert bundle.models == [bundle.model] and bundle.model.training is False
    assert bundle.config is bundle.model.config and bundle.config.d_model == 32
    assert bundle.info["src_lang"] == "es" and bundle.model_dir == toy_model_dir
    assert bundle.tokenizer.path == toy_model_dir / "spm.model"
    assert bundle.draft is None and not bundle.int8 and not bundle.always_shortlist


def test_translate_batch_always_answers_translations(bundle):
    translator = Translator(bundle)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for search in ({}, {"beam_size": 3, "n_best": 2}):
            out = translator.translate_batch(TEXTS, **search)
            assert len(out) == len(TEXTS)
            assert all(1 <= len(hyps) <= search.get("n_best", 1) for hyps in out)
            assert all(isinstance(t, Translation) for hyps in out for t in hyps)
        assert translate_texts(translator, TEXTS) == [
            hyps[0].text for hyps in translator.translate_batch(TEXTS)
        ]
        assert translate_document(translator, "el gato come.\n\nel perro bebe agua.\n").count("\n\n") == 1


def test_the_older_calls_still_work_and_warn(bundle, toy_model_dir):
    translator = Translator(bundle)
    best = translate_texts(translator, TEXTS)
    with pytest.warns(DeprecationWarning, match="Translator.translate is deprecated"):
        assert translator.translate(TEXTS) == best
    with pytest.warns(DeprecationWarning):
        assert translator.translate(TEXTS, return_scores=True) == translator.translate_batch(TEXTS)
    with pytest.warns(DeprecationWarning):
        assert [h[0].text for h in translator.translate(TEXTS, n_best=2, beam_size=2)] == translate_texts(
            translator, TEXTS, beam_size=2
        )
    with pytest.warns(
        DeprecationWarning, match="Translator.model is deprecated: use translator.bundle.model"
    ):
        assert translator.model is bundle.model
    with pytest.warns(DeprecationWarning, match=r"Translator\(model, tokenizer, \.\.\.\) is deprecated"):
        old = Translator(bundle.model, bundle.tokenizer, bundle.info)
    assert old.bundle.models == [bundle.model] and translate_texts(old, TEXTS) == best
    loaded = Translator.load(toy_model_dir, "cpu")  # a shortcut, not deprecated
    assert translate_texts(loaded, TEXTS) == best


def test_a_shortlist_asked_of_a_model_without_one_is_a_one_line_error_at_load(toy_model_dir):
    with pytest.raises(AiaynError, match="has no shortlist"):
        load_bundle(toy_model_dir, device="cpu", shortlist=True)
