"""Translator: text in, text out, in input order, with the toy word-for-word model."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
import torch

from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translation, Translator, token_batches
from aiayn.errors import AiaynError
from toy_translation import toy_pairs


def test_load_exposes_model_tokenizer_config(translator, toy_model_dir):
    assert translator.bundle.model.training is False
    assert translator.config.d_model == 32
    assert translator.info["src_lang"] == "es"
    assert translator.tokenizer.path == toy_model_dir / "spm.model"


def test_translates_the_toy_language(translator):
    pairs = toy_pairs(30, seed=11)
    out = translate_texts(translator, [s for s, _ in pairs])
    correct = sum(o == ref for o, (_, ref) in zip(out, pairs, strict=True))
    assert correct >= 15, list(zip(out, pairs, strict=True))


@pytest.mark.parametrize("beam", [1, 4])
def test_batched_equals_one_at_a_time_in_input_order(translator, beam):
    texts = [s for s, _ in toy_pairs(12, seed=3)] + ["", "agua"]
    together = translate_texts(translator, texts, beam_size=beam, batch_tokens=20)  # several batches
    alone = [translate_texts(translator, [t], beam_size=beam)[0] for t in texts]
    assert together == alone
    assert together[-2] == ""


def test_nbest_with_scores(translator):
    texts = ["el perro come", "", "sol"]
    results = translator.translate_batch(texts, beam_size=5, n_best=3)
    assert [len(r) for r in results] == [3, 1, 3]
    assert results[1][0] == Translation("", 0.0, 0.0, [])
    for hyps in (results[0], results[2]):
        assert all(isinstance(h, Translation) for h in hyps)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({h.text for h in hyps}) == 3
    best = translate_texts(translator, texts, beam_size=5)
    assert best == [r[0].text for r in results]
    assert translator.translate_batch(texts, beam_size=5)[0][0] == results[0][0]


def test_a_very_long_text_is_translated_sentence_by_sentence_with_a_warning(translator):
    text = " ".join(["el perro come."] * 300)  # about 1,200 tokens: over the limit of 1,024
    with pytest.warns(
        UserWarning, match=r"text 1 has \d+ tokens, over the limit of 1024: translated in 300 parts"
    ):
        (out,) = translate_texts(translator, [text], beam_size=2)
    assert out.count("dog") == 300 and out.count("the dog eats") == 300  # nothing dropped
    calls = []
    translate_texts(translator, ["agua", text], beam_size=1, on_split=lambda *a: calls.append(a))
    assert len(calls) == 1 and calls[0][0] == 1 and calls[0][2:] == (1024, 300)


def test_bad_arguments(translator):
    with pytest.raises(AiaynError, match="list of texts"):
        translate_texts(translator, "el perro")
    with pytest.raises(AiaynError, match="n_best"):
        translator.translate_batch(["el"], beam_size=2, n_best=3)


@pytest.mark.parametrize("beam", [1, 4])
def test_a_model_with_nan_weights_gets_a_clear_error(toy_model_dir, beam):
    broken = Translator.load(toy_model_dir, device="cpu")
    with torch.no_grad():
        next(broken.bundle.model.parameters()).fill_(float("nan"))
    with pytest.raises(AiaynError, match="text 2: the model's scores are not finite"):
        translate_texts(broken, ["", "el perro"], beam_size=beam)


def test_attention_of_a_translation(translator):
    maps = translator.attention("el perro come")
    assert maps["translation"] == translate_texts(translator, ["el perro come"])[0]
    s, t = len(maps["src_tokens"]), len(maps["tgt_tokens"])
    assert maps["src_tokens"][-1] == "</s>" and maps["tgt_tokens"][-1] == "</s>"
    assert "".join(maps["tgt_tokens"][:-1]).replace("\u2581", " ").strip() == maps["translation"]
    heads, layers = translator.config.n_heads, translator.config.n_layers
    for kind, shape in (("encoder", (heads, s, s)), ("decoder", (heads, t, t)), ("cross", (heads, t, s))):
        assert len(maps[kind]) == layers
        for w in maps[kind]:
            assert tuple(w.shape) == shape
            torch.testing.assert_close(w.sum(-1), torch.ones(shape[:2]))  # each row a distribution
    assert torch.all(maps["decoder"][0].triu(1) == 0)  # causal


def test_attention_is_for_one_non_empty_sentence(translator):
    with pytest.raises(AiaynError, match="^attention maps need a non-empty text$"):
        translator.attention("  ")
    with pytest.raises(AiaynError, match="^attention maps are drawn for one sentence of at most 1024 tokens"):
        translator.attention("el perro come. " * 400)


def test_token_batches_pack_by_padded_size():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    batches = token_batches(lengths, batch_tokens=12)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 12
    assert token_batches([50], 10) == [[0]]  # too long for any batch: alone


def test_a_sentence_far_longer_than_the_training_ones_is_split_with_a_warning(translator):
    """A model directory that records its longest training source (config.json's
    longest_source) translates a text over twice that in sentences, as an over-long text."""
    text = "el perro come. el gato bebe agua."
    n = len(translator.encode([text])[0])
    trained = Translator(replace(translator.bundle, info={**translator.info, "longest_source": n // 2 - 1}))
    limit = 2 * (n // 2 - 1)
    with pytest.warns(
        UserWarning, match=rf"text 1 has {n} tokens, over the limit of {limit}: translated in 2 parts"
    ):
        (out,) = translate_texts(trained, [text], beam_size=2)
    assert out == " ".join(translate_texts(translator, ["el perro come.", "el gato bebe agua."], beam_size=2))
    roomy = Translator(replace(translator.bundle, info={**translator.info, "longest_source": n}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no split, no warning: within reach of what it was trained on
        assert translate_texts(roomy, [text], beam_size=2) == translate_texts(translator, [text], beam_size=2)
