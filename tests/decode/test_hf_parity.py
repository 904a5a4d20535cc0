"""length_penalty_style="len" reproduces Hugging Face `generate` (beam search and greedy) exactly on
the same weights: a small random MarianMTModel converted with aiayn.interop."""

from __future__ import annotations

import pytest
import torch
from transformers import MarianConfig, MarianMTModel

from aiayn.config import DecodeConfig
from aiayn.decode.stepper import decode_batch
from aiayn.interop.marian_import import config_from_marian, resolve_embeddings
from aiayn.interop.weights import marian_to_aiayn
from aiayn.model.transformer import Transformer

VOCAB, EOS, UNK, PAD = 40, 0, 1, 39


@pytest.fixture(scope="module")
def models() -> tuple[MarianMTModel, Transformer]:
    hf_config = MarianConfig(
        vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=EOS,
        scale_embedding=True, activation_function="swish",
    )  # fmt: skip
    torch.manual_seed(3)
    hf = MarianMTModel(hf_config).eval()
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
