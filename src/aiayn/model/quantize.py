"""int8 inference on the CPU (`--int8`): dynamic quantisation of the model's matrix products.

What is quantised: every projection of 3.2.2 (the fused Q/K/V, the cross-attention Q and K/V,
the output projection of each attention), both layers of the feed-forward network (Eq. 2) and the
pre-softmax linear transformation (3.4; with tied embeddings an int8 copy of the embedding matrix,
as CTranslate2's int8 does). Their weights are stored as int8 with one scale per output row
(symmetric, per channel). Each call quantises its input on the fly to 8 bits (7 on CPUs without
VNNI, see `Int8Linear`) with one scale and zero point taken from that input's range ("dynamic":
no calibration data), multiplies in int8 with int32 accumulation (PyTorch's
`quantized::linear_dynamic`, FBGEMM's kernels) and returns float32 with the float32 bias added.
Everything else stays float32: embedding lookups, positions, layer norm, softmax, and attention's
own products (Q K^T and weights x V, whose operands change every step).

Why: decoding on the CPU spends much of its time in these products, with few rows per step
(sentences x beams); the int8 kernels compute them 2.5-4x faster than the float32 oneDNN ones
on the tiny and base models' shapes (one thread, this project's AMD CPU), and the int8 weights
take a quarter of the memory. Attention, beam bookkeeping and the softmax over the vocabulary
do not get faster, so whole decoding gains less. The cost is a small loss of accuracy (README:
the BLEU difference on the Bible test books).

It uses `torch.ao.quantization.quantize_dynamic`, which PyTorch has deprecated in favour of torchao
but which is present and works in the pinned torch 2.13 (its deprecation notices are silenced
here). A quantised model is for inference on the CPU only: no gradients, no GPU, and it is not
saved (model directories keep float32 weights; quantise after loading).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

from aiayn.errors import AiaynError

QCONFIG = per_channel_dynamic_qconfig  # int8 weights, one scale per output row; dynamic 8-bit inputs


def _has_vnni() -> bool:
    try:
        return bool(torch.cpu._is_vnni_supported())
    except (AttributeError, RuntimeError):
        return False


class Int8Linear(DynamicQuantizedLinear):
    """PyTorch's dynamically quantised Linear, with 8-bit inputs where the CPU has VNNI.

    PyTorch quantises the inputs to 7 bits ("reduce_range"): without VNNI, x86 int8 kernels add
    pairs of u8 x s8 products in int16, which full 8-bit values can overflow. VNNI instructions
    accumulate in int32, so there the 8th bit is free: on the quickstart model's 938 Bible test
    verses it raises the share translated exactly as in float32 from 46% to 62% (BLEU 21.21 ->
    21.24; float32 21.25), at the same speed.
    """

    reduce_range = not _has_vnni()

    def forward(self, x: Tensor) -> Tensor:
        packed = self._packed_params._packed_params
        return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=self.reduce_range).to(x.dtype)

    def _get_name(self) -> str:
        return "Int8Linear"


def check_int8_device(device: str | torch.device | None) -> torch.device:
    """The device an int8 model runs on: the CPU (also when none is given); a one-line error otherwise."""
    device = torch.device(device or "cpu")
    if device.type != "cpu":
        raise AiaynError(f"int8 inference (--int8) runs on the CPU only, not on {device}: use --device cpu")
    if torch.backends.quantized.engine == "none":
        raise AiaynError("int8 inference (--int8) needs PyTorch's quantised CPU kernels; this build has none")
    return device


def int8_linear(weight: Tensor, bias: Tensor | None = None) -> Int8Linear:
    """An int8 y = x W^T + b from a float32 weight (out, in) and bias (out,) (which are not kept)."""
    float_layer = nn.Linear(weight.size(1), weight.size(0), bias=bias is not None, device="meta")
    float_layer.weight = nn.Parameter(weight.detach().float(), requires_grad=False)
    if bias is not None:
        float_layer.bias = nn.Parameter(bias.detach().float(), requires_grad=False)
    float_layer.qconfig = QCONFIG
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
        return Int8Linear.from_float(float_layer)


def is_int8(model: nn.Module) -> bool:
    """Whether `quantize_int8` has been applied to `model`."""
    return bool(getattr(model, "int8", False))


def quantize_int8(model: nn.Module, output_layer: bool = True) -> nn.Module:
    """Quantise `model` (a Transformer) for int8 inference, in place; returns it in eval mode.

    Every `nn.Linear` becomes an `Int8Linear`; with `output_layer`, the pre-softmax linear
    transformation too (`Transformer.output_layer`). The model must be on the CPU. Quantising an
    already quantised model does nothing.
    """
    if is_int8(model):
        return model
    check_int8_device(next(model.parameters()).device)
    model.eval()
    count = model.num_parameters()  # before the Linear weights stop being Parameters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
        quantize_dynamic(
            model, {nn.Linear: QCONFIG}, dtype=torch.qint8, mapping={nn.Linear: Int8Linear}, inplace=True
        )
    if output_layer and hasattr(model, "output_weight"):
        model.output_layer = int8_linear(model.output_weight, model.output_bias)
    model.int8, model.float_parameters = True, count
    return model
