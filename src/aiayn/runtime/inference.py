"""A loaded model made ready to decode fast on its device: int8 products (`quantize`) or float
weights packed where that measures faster (`linear`), and on the CPU the native decoding step
(`native_step`). `Translator.load` prepares its models so, and a draft model the same way."""

from __future__ import annotations

from aiayn.model.transformer import Transformer
from aiayn.runtime.linear import pack_for_inference
from aiayn.runtime.native_step import attach_native_decoder
from aiayn.runtime.quantize import quantize_int8


def prepare_for_inference(model: Transformer, int8: bool = False, name: str = "the model") -> None:
    """Quantise `model`'s linear layers (`int8`; `name` says which model an error is about) or pack
    its float weights, then attach the native step where the model is on the CPU (it holds the final
    weights by reference)."""
    if int8:
        quantize_int8(model, name=name)
    else:
        pack_for_inference(model)  # weights reordered once for oneDNN, where that measures faster
    if model.output_weight.device.type == "cpu":
        attach_native_decoder(model)  # one native call a decoding step, where it builds
