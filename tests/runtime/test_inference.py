"""A loaded model made ready to decode (aiayn.runtime.inference): packed float weights compute what
the model computed, int8 quantises its products, and the native step is attached on the CPU."""

from __future__ import annotations

import torch

from aiayn.model.io import load_model_dir
from aiayn.runtime import native_build
from aiayn.runtime.inference import prepare_for_inference
from aiayn.runtime.native_step import native_decoder
from aiayn.runtime.quantize import Int8Linear


def logits(model, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(src, tgt_in).float()  # (batch, tgt, vocab)


def test_a_prepared_model_computes_what_the_loaded_one_did(toy_model_dir):
    reference, _ = load_model_dir(toy_model_dir, "cpu")
    model, _ = load_model_dir(toy_model_dir, "cpu")
    prepare_for_inference(model)
    src, tgt_in = torch.tensor([[5, 9, 14, 3], [7, 8, 20, 3]]), torch.tensor([[0, 11, 6], [0, 12, 13]])
    torch.testing.assert_close(
        logits(model, src, tgt_in), logits(reference, src, tgt_in), atol=1e-4, rtol=1e-4
    )
    assert (native_decoder(model) is not None) == bool(native_build.load())


def test_int8_quantises_the_products_and_keeps_the_predictions(toy_model_dir):
    reference, _ = load_model_dir(toy_model_dir, "cpu")
    model, _ = load_model_dir(toy_model_dir, "cpu")
    prepare_for_inference(model, int8=True)
    assert isinstance(model.output_layer, Int8Linear)
    src, tgt_in = torch.tensor([[5, 9, 14, 3]]), torch.tensor([[0, 11, 6]])
    got, want = logits(model, src, tgt_in), logits(reference, src, tgt_in)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert (got.log_softmax(-1) - want.log_softmax(-1)).abs().max() < 0.5
