"""aiayn's searches on ONNX Runtime (aiayn.interop.onnx_runtime) over the toy translator's export:
the same translations and scores as aiayn's own greedy and beam search, every step's logits within
1e-4, and the int8 decoder translating as the fp32 one mostly does."""

from __future__ import annotations

import pytest
import torch
from onnx_helpers import HELD_OUT, export_ids

from aiayn.config import DecodeConfig
from aiayn.model.io import load_model_dir

ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install aiayn[onnx])")
from aiayn.interop.onnx_runtime import OnnxModel, OnnxStepper  # noqa: E402


@pytest.mark.parametrize(
    "beam, alpha, style", [(1, 0.6, "gnmt"), (4, 0.6, "gnmt"), (4, 1.0, "len"), (4, 1.0, "fairseq")]
)
def test_onnx_runtime_translates_as_aiayn(onnx_dir, onnx_toy, beam, alpha, style):
    translator, _, to_export = onnx_toy
    options = DecodeConfig(beam_size=beam, alpha=alpha, length_penalty_style=style)
    theirs = OnnxModel.load(onnx_dir, threads=1).search(export_ids(onnx_dir, HELD_OUT), options)
    ours = translator.translate_batch(HELD_OUT, beam_size=beam, alpha=alpha, length_penalty_style=style)
    assert [h[0].tokens for h in theirs] == [
        to_export[torch.tensor(t[0].tokens, dtype=torch.long)].tolist() for t in ours
    ]
    assert sum(len(t[0].tokens) for t in ours) > 3 * len(HELD_OUT)  # real translations
    torch.testing.assert_close(
        torch.tensor([h[0].score for h in theirs]),
        torch.tensor([t[0].score for t in ours]),
        atol=1e-4,
        rtol=0,
    )


def test_each_steps_logits_are_aiayns(onnx_dir, onnx_toy, toy_model_dir):
    """Teacher-forced on aiayn's own greedy outputs: every step's fp32 logits within 1e-4."""
    translator, from_export, to_export = onnx_toy
    model = load_model_dir(toy_model_dir, "cpu")[0].eval()
    texts = HELD_OUT[:8]
    outputs = [t[0].tokens for t in translator.translate_batch(texts, beam_size=1)]
    session = OnnxModel.load(onnx_dir)
    for text, tokens in zip(texts, outputs, strict=True):
        src = torch.tensor([translator.encode([text])[0]])
        tgt_in = torch.tensor([[translator.config.start_id, *tokens]])
        with torch.no_grad():
            ours = model(src, tgt_in)[0][:, from_export]  # (steps, vocab) in the export's order
        stepper = OnnxStepper(session.encoder, session.decoder, to_export[src].numpy(), session.pad_id, 1)
        theirs = torch.cat([stepper.logits(to_export[tgt_in[:, t]]) for t in range(tgt_in.size(1))])
        torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)


def test_int8_weights_translate_sanely(onnx_dir):
    src = export_ids(onnx_dir, HELD_OUT)
    options = DecodeConfig(beam_size=1)
    fp32 = [h[0].tokens for h in OnnxModel.load(onnx_dir).search(src, options)]
    int8 = [h[0].tokens for h in OnnxModel.load(onnx_dir, int8=True).search(src, options)]
    assert sum(a == b for a, b in zip(fp32, int8, strict=True)) >= 0.75 * len(HELD_OUT)
    quantized = onnx_dir / "onnx/decoder_model_merged_quantized.onnx"
    assert quantized.stat().st_size < (onnx_dir / "onnx/decoder_model_merged.onnx").stat().st_size
