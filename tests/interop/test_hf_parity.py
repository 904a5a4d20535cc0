"""aiayn's decoding against Hugging Face `generate` on the same weights, all in one place.

A small random MarianMTModel converted with aiayn.interop: length_penalty_style="len" reproduces
`generate` (beam search and greedy) exactly, token ids and scores (decode_batch).

An imported Marian model directory decoded with aiayn's Translator gives what `generate` gives.
Greedy: identical outputs with HF's own settings. Beam search with lp = |Y|^alpha (style "len"):
identical n-best lists and scores. One convention differs, only at the length cap: when a
hypothesis reaches the maximum length, HF's forced EOS gets log-probability 0, while aiayn (like
fairseq) keeps the model's log P(EOS). `KeepEOSLogProb` gives HF aiayn's convention; away from the
cap stock `generate` agrees as is.
"""

from __future__ import annotations

import math

import pytest
import torch
from marian_helpers import SOURCE_WORDS, make_marian, quiet_sacremoses, synthetic_text

from aiayn.config import DecodeConfig
from aiayn.decode.generate import decode_batch
from aiayn.decode.translator import Translator
from aiayn.interop.marian_import import config_from_marian, import_marian, resolve_embeddings
from aiayn.interop.weights import marian_to_aiayn
from aiayn.model.transformer import Transformer

transformers = pytest.importorskip("transformers", reason="needs transformers (pip install transformers)")

TEXTS = synthetic_text(SOURCE_WORDS, 10, 7) + ["alpha", "kappa kappa kappa lambda"]
MAX_TOKENS = 12  # aiayn: at most 12 tokens + EOS; HF: max_length = 12 + 2 (start token and EOS)
EOS = 0
VOCAB, UNK, PAD = 40, 1, 39  # the random model of test_len_style_equals_hf_generate


class KeepEOSLogProb(transformers.LogitsProcessor):
    """At the last position allow only EOS, keeping its log-probability (HF's forced EOS sets it to 0)."""

    def __init__(self, max_length: int):
        self.max_length = max_length

    def __call__(self, input_ids, scores):
        if input_ids.shape[-1] == self.max_length - 1:
            eos = scores[:, EOS].clone()
            scores = torch.full_like(scores, -math.inf)
            scores[:, EOS] = eos
        return scores


def setup(tokenizer_files, tmp_path, vocab="shared", **kwargs):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files[vocab], **kwargs)
    translator = Translator.load(import_marian(hf_dir, tmp_path / "aiayn"), device="cpu")
    with quiet_sacremoses():
        tokenizer = transformers.MarianTokenizer.from_pretrained(hf_dir, separate_vocabs=vocab == "separate")
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    return translator, tokenizer, model


def generate(model, tokenizer, keep_eos: bool = False, **kwargs):
    """HF generate with OPUS-MT's settings (<pad> banned, EOS forced at max_length) -> (ids, scores)."""
    batch = tokenizer(TEXTS, return_tensors="pt", padding=True)
    max_length = MAX_TOKENS + 2
    forced = dict(forced_eos_token_id=EOS)
    if keep_eos:
        forced = dict(forced_eos_token_id=None, logits_processor=[KeepEOSLogProb(max_length)])
    with torch.no_grad():
        out = model.generate(
            **batch,
            do_sample=False,
            max_length=max_length,
            bad_words_ids=[[tokenizer.pad_token_id]],
            return_dict_in_generate=True,
            **forced,
            **kwargs,
        )
    special = {EOS, tokenizer.pad_token_id}
    ids = [[t for t in row[1:] if t not in special] for row in out.sequences.tolist()]  # drop start, EOS, pad
    return ids, out, tokenizer.batch_decode(out.sequences, skip_special_tokens=True)


def translate(translator, **kwargs):
    return translator.translate_batch(
        TEXTS, length_penalty_style="len", max_len_a=0.0, max_len_b=MAX_TOKENS, **kwargs
    )


@pytest.mark.parametrize(
    "vocab, shape",
    [
        ("shared", dict(activation="swish")),
        ("separate", dict(d_model=64, heads=4, activation="gelu", scale_embedding=False, dec_layers=2)),
    ],
)
def test_greedy_matches_generate(tokenizer_files, tmp_path, vocab, shape):
    translator, tokenizer, model = setup(tokenizer_files, tmp_path, vocab, **shape)
    assert translator.encode(TEXTS) == tokenizer(TEXTS)["input_ids"]
    hf_ids, _, hf_text = generate(model, tokenizer, num_beams=1)
    ours = translate(translator, beam_size=1)
    assert [t[0].tokens for t in ours] == hf_ids
    assert [t[0].text for t in ours] == hf_text
    assert any(hf_ids)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model_args, alpha",
    [
        (dict(seed=0, std=0.2, eos_bias=2.0), 1.0),  # some hypotheses end early, most reach the cap
        (dict(seed=1, std=0.3), 0.6),
        (dict(seed=2, std=0.3, eos_bias=1.0, d_model=64, heads=4, activation="relu"), 1.2),
    ],
)
def test_beam_nbest_matches_generate(tokenizer_files, tmp_path, model_args, alpha):
    translator, tokenizer, model = setup(tokenizer_files, tmp_path, **model_args)
    kwargs = dict(num_beams=4, length_penalty=alpha, num_return_sequences=4, output_scores=True)
    hf_ids, out, hf_text = generate(model, tokenizer, keep_eos=True, **kwargs)
    ours = translate(translator, beam_size=4, alpha=alpha, n_best=4)
    assert [h.tokens for hyps in ours for h in hyps] == hf_ids
    scores = torch.tensor([h.score for hyps in ours for h in hyps])
    torch.testing.assert_close(scores, out.sequences_scores, atol=1e-4, rtol=0)
    assert [hyps[0].text for hyps in ours] == hf_text[::4]


def test_beam_matches_stock_generate_away_from_the_cap(tokenizer_files, tmp_path):
    translator, tokenizer, model = setup(tokenizer_files, tmp_path, seed=0, std=0.3, eos_bias=1.0)
    hf_ids, _, _ = generate(model, tokenizer, num_beams=4, length_penalty=0.6)
    assert 0 < max(map(len, hf_ids)) < MAX_TOKENS  # ended by EOS, not by the cap
    ours = translate(translator, beam_size=4, alpha=0.6)
    assert [t[0].tokens for t in ours] == hf_ids


@pytest.fixture(scope="module")
def models() -> tuple[transformers.MarianMTModel, Transformer]:
    hf_config = transformers.MarianConfig(
        vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=EOS,
        scale_embedding=True, activation_function="swish",
    )  # fmt: skip
    torch.manual_seed(3)
    hf = transformers.MarianMTModel(hf_config).eval()
    with torch.no_grad():
        hf.final_logits_bias[0, EOS] = 2.0  # EOS competes at every step: finishing logic is exercised
    weights = dict(hf.state_dict())
    embeddings, tie = resolve_embeddings(hf_config.to_dict(), weights)
    config = config_from_marian(hf_config.to_dict(), tie, unk_id=UNK).replace(dropout=0.0)
    model = Transformer(config)
    model.load_state_dict(marian_to_aiayn(weights, config, embeddings))
    return hf, model.eval()


@pytest.mark.parametrize("beam,alpha", [(4, 0.6), (4, 1.0), (3, 0.0), (1, 1.0)])
def test_len_style_equals_hf_generate(models, beam, alpha):
    hf, model = models
    g = torch.Generator().manual_seed(beam * 10 + int(alpha * 10))
    src = torch.randint(2, PAD, (16, 9), generator=g)
    src[:, -1] = EOS
    max_length = 12  # HF counts the start token and EOS: aiayn's max_len_b = 12 - 2
    with torch.inference_mode():
        out = hf.generate(
            input_ids=src, attention_mask=torch.ones_like(src), num_beams=beam, length_penalty=alpha,
            max_length=max_length, do_sample=False, early_stopping=False, output_scores=True,
            return_dict_in_generate=True,
        )  # fmt: skip
    options = DecodeConfig(
        beam_size=beam, alpha=alpha, length_penalty_style="len", max_len_a=0.0, max_len_b=10
    )
    ours = decode_batch(model, src, options)
    for i, hyps in enumerate(ours):
        theirs = [t for t in out.sequences[i, 1:].tolist() if t != PAD]
        assert theirs[-1] == EOS
        assert hyps[0].tokens == theirs[:-1], i
        if beam > 1:
            assert hyps[0].score == pytest.approx(float(out.sequences_scores[i]), abs=1e-4)
