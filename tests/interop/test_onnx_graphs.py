"""The modules export-onnx traces (aiayn.interop.onnx_graphs) against Transformers' own MarianMTModel
on a tiny random one: Marian's [sin | cos] positions (3.5), the encoder's output, Optimum's names."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.interop.onnx_graphs import MarianEncoderGraph, marian_positions, past_names

transformers = pytest.importorskip("transformers")


def test_marian_positions_are_sin_then_cos_of_section_3_5():
    table = marian_positions(7, 6)  # (positions, d_model)
    for pos in range(7):
        angles = [pos / 10000 ** (2 * j / 6) for j in range(3)]
        expected = [math.sin(a) for a in angles] + [math.cos(a) for a in angles]
        assert table[pos].tolist() == pytest.approx(expected, abs=1e-6)
    assert marian_positions(3, 5).shape == (3, 5)  # an odd width: one cosine fewer


def test_past_names_are_optimum_s():
    assert past_names(2, "present")[:5] == [
        "present.0.decoder.key", "present.0.decoder.value", "present.0.encoder.key",
        "present.0.encoder.value", "present.1.decoder.key",
    ]  # fmt: skip
    assert len(past_names(3)) == 12


@pytest.mark.parametrize("scale", [True, False])
def test_the_encoder_graph_computes_marian_s_encoder(scale):
    config = transformers.MarianConfig(
        vocab_size=30, d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
        scale_embedding=scale, pad_token_id=29, decoder_start_token_id=29,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    graph = MarianEncoderGraph(model.state_dict(), config.to_dict()).eval()
    ids = torch.randint(0, 29, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    ids[1, 4:] = 29
    with torch.no_grad():
        expected = model.model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state  # (2, 6, 16)
        got = graph(ids, mask)
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1, :4], expected[1, :4], atol=1e-5, rtol=1e-5)  # the real tokens
