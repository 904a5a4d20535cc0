"""int8 inference on the CPU (`--int8`): dynamic quantisation of the model's matrix products.

What is quantised: every projection of 3.2.2 (the fused Q/K/V, the cross-attention Q and K/V,
the output projection of each attention), both layers of the feed-forward network (Eq. 2) and the
pre-softmax linear transformation (3.4; with tied embeddings an int8 copy of the embedding matrix,
as CTranslate2's int8 does). Their weights are stored as int8 with one scale per output row
(symmetric, per channel). Each call quantises its input on the fly to 8 bits with one scale and
zero point taken from that input's range ("dynamic": no calibration data), multiplies in int8
into int32 sums (PyTorch's `quantized::linear_dynamic`, FBGEMM's kernels; see the paths) and returns
float32 with the float32 bias added. Everything else stays float32: embedding lookups,
positions, layer norm, softmax, and attention's own products (Q K^T and weights x V).

Two paths (`Int8Path`), because x86 int8 kernels differ by CPU. With AVX-512 VNNI (what PyTorch
detects) products of u8 inputs and s8 weights add in int32: inputs and weights keep 8 bits.
Without it (AVX2, AVX-VNNI-only CPUs and plain AVX-512) FBGEMM adds pairs of u8 x s8 products in
int16 first, which saturates at 2^15 - 1: two products of 255 x 127 reach 64,770. PyTorch's
answer ("reduce_range") drops the inputs to 7 bits, but an input has one scale for the whole
tensor and is far less uniform than a weight row, so its lost bit costs most. The no-VNNI path
keeps the inputs at 8 bits and gives the weights 7 (|q| <= 63, one scale per row): 2 x 255 x 63 =
32,130 fits in int16. On the toy translator it lowers the error of the log-probabilities by ~30%
against 7-bit inputs, to that of the VNNI path (README, int8). `AIAYN_INT8_PATH=no-vnni` forces
that path on any CPU. What decides is the kernel FBGEMM runs, not the CPU alone: FBGEMM's own switch
`FBGEMM_ENABLE_INSTRUCTIONS=AVX2` (or AVX512, AVX512_256) holds it to the int16-pair kernels on a
VNNI CPU too, and then the automatic choice is the no-VNNI path; so a VNNI machine tests that path's
integer arithmetic on the kernels of a CPU without VNNI (tests/runtime/test_quantize.py).

Why int8: decoding on the CPU spends much of its time in these products, with few rows per step
(sentences x beams); the int8 kernels compute them several times faster than float32, and the
int8 weights take a quarter of the memory. A quantised model is for inference on the CPU only: no
gradients, no GPU, and it is not saved (model directories keep float32 weights).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping

import torch
from torch import Tensor, nn

from aiayn.errors import AiaynError
from aiayn.runtime.linear import PackedLinear

PATH_ENV = "AIAYN_INT8_PATH"  # auto (default), vnni or no-vnni
FBGEMM_ENV = "FBGEMM_ENABLE_INSTRUCTIONS"  # FBGEMM's choice of x86 kernels (it reads it once)
FBGEMM_WITHOUT_VNNI = frozenset({"AVX2", "AVX512", "AVX512_256"})  # its names of kernels without VNNI


@dataclasses.dataclass(frozen=True)
class Int8Path:
    """How many bits inputs and weights get, and why."""

    name: str
    activation_bits: int
    weight_bits: int
    why: str

    @property
    def weight_max(self) -> int:
        """The largest |q| of an int8 weight: 127 for 8 bits, 63 for 7."""
        return (1 << (self.weight_bits - 1)) - 1


VNNI = Int8Path("vnni", 8, 8, "VNNI sums u8 x s8 products in int32")
NO_VNNI = Int8Path(
    "no-vnni", 8, 7, "without VNNI pairs of u8 x s8 products sum in int16: weights within +-63"
)
PATHS = {p.name: p for p in (VNNI, NO_VNNI)}


def fbgemm_forbids_vnni(env: Mapping[str, str] | None = None) -> bool:
    """Whether `FBGEMM_ENABLE_INSTRUCTIONS` holds FBGEMM to x86 kernels without VNNI (int16 pairs).

    As FBGEMM reads it: upper-cased, not trimmed; a name it does not know leaves the CPU to decide.
    FBGEMM reads the variable once, at its first kernel: set it before, not during, a process's int8 work.
    """
    env = os.environ if env is None else env
    return env.get(FBGEMM_ENV, "").upper() in FBGEMM_WITHOUT_VNNI


def has_vnni(env: Mapping[str, str] | None = None) -> bool:
    """Whether FBGEMM's int8 kernels sum in int32 here: PyTorch sees AVX-512 VNNI on this CPU (it does
    not count AVX-VNNI) and `FBGEMM_ENABLE_INSTRUCTIONS` does not hold FBGEMM to kernels without."""
    if fbgemm_forbids_vnni(env):
        return False
    try:
        return bool(torch.cpu._is_vnni_supported())
    except (AttributeError, RuntimeError):
        return False


def choose_int8_path(env: Mapping[str, str] | None = None, vnni: bool | None = None) -> Int8Path:
    """The path for FBGEMM's kernels here, or the one `AIAYN_INT8_PATH` names (a one-line error if
    they cannot run it). `vnni` overrides what `has_vnni(env)` finds."""
    env = os.environ if env is None else env
    vnni = has_vnni(env) if vnni is None else vnni
    name = env.get(PATH_ENV, "auto").strip().lower() or "auto"
    if name == "auto":
        return VNNI if vnni else NO_VNNI
    if name not in PATHS:
        raise AiaynError(f"{PATH_ENV}={name!r} is not one of auto, vnni, no-vnni")
    if name == "vnni" and not vnni:
        why = "a CPU with VNNI (its int16 sums would saturate here)"
        if fbgemm_forbids_vnni(env):
            why = f"VNNI kernels, and {FBGEMM_ENV}={env[FBGEMM_ENV]} holds FBGEMM to kernels without"
        raise AiaynError(f"{PATH_ENV}=vnni needs {why}")
    return PATHS[name]


def int8_path() -> dict:
    """The path int8 models take on this machine, as a dict (for `aiayn doctor`)."""
    return dataclasses.asdict(choose_int8_path())


class Int8Linear(nn.Module):
    """y = x W^T + b with W in int8 (one scale per row) and x quantised to 8 bits on each call."""

    def __init__(self, weight: Tensor, bias: Tensor | None, path: Int8Path, quantized: bool = False) -> None:
        """weight (out, in) float, quantised here (one scale per row); or, `quantized`, already a
        per-channel qint8 tensor (`rows`)."""
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.path = path
        if not quantized:
            weight = weight.detach().float().cpu()  # (out, in)
            scale = weight.abs().amax(1).clamp_min(1e-12) / path.weight_max  # (out,)
            zero = torch.zeros(weight.size(0), dtype=torch.long)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's deprecation notice on quantised tensors
                weight = torch.quantize_per_channel(weight, scale.double(), zero, 0, torch.qint8)
        bias = None if bias is None else bias.detach().float().cpu()
        self._packed = torch.ops.quantized.linear_prepack(weight, bias)

    def forward(self, x: Tensor, *model_weights: Tensor | None) -> Tensor:
        """x (..., in) float32 -> (..., out) float32. As a Transformer's pre-softmax layer it is also
        passed the model's float32 output weight and bias (`model_weights`), which it does not read."""
        return torch.ops.quantized.linear_dynamic(x, self._packed, reduce_range=False)

    def weight(self) -> Tensor:
        """The int8 weight (out, in) as a per-channel quantised tensor."""
        return torch.ops.quantized.linear_unpack(self._packed)[0]

    def rows(self, index: Tensor) -> Int8Linear:
        """The layer of outputs `index` (kept,) only: its int8 rows and scales as they are here (what
        quantising the float rows again gives, without the cost: a shortlist's output layer per
        batch, aiayn.decode.shortlist). The unpacked weight is kept after the first call."""
        if not hasattr(self, "_unpacked"):
            weight, bias = torch.ops.quantized.linear_unpack(self._packed)
            self._unpacked = (weight.int_repr(), weight.q_per_channel_scales(), bias)
        ints, scales, bias = self._unpacked
        index = index.to(ints.device)
        zero = torch.zeros(index.numel(), dtype=torch.long)
        qweight = torch._make_per_channel_quantized_tensor(ints[index], scales[index], zero, 0)
        return Int8Linear(qweight, None if bias is None else bias[index], self.path, quantized=True)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, path={self.path.name}"


def check_int8_device(device: str | torch.device | None) -> torch.device:
    """The device an int8 model runs on: the CPU (also when none is given); a one-line error otherwise."""
    device = torch.device(device or "cpu")
    if device.type != "cpu":
        raise AiaynError(f"int8 inference (--int8) runs on the CPU only, not on {device}: use --device cpu")
    if torch.backends.quantized.engine == "none":
        raise AiaynError("int8 inference (--int8) needs PyTorch's quantised CPU kernels; this build has none")
    return device


def int8_linear(weight: Tensor, bias: Tensor | None = None, path: Int8Path | None = None) -> Int8Linear:
    """An int8 y = x W^T + b from a float32 weight (out, in) and bias (out,) (which are not kept)."""
    return Int8Linear(weight, bias, path or choose_int8_path())


def is_int8(model: nn.Module) -> bool:
    """Whether `quantize_int8` has been applied to `model` (it has int8 layers)."""
    return any(isinstance(module, Int8Linear) for module in model.modules())


def quantize_int8(
    model: nn.Module, output_layer: bool = True, path: Int8Path | None = None, name: str = "the model"
) -> nn.Module:
    """Quantise `model` (a Transformer) for int8 inference, in place; returns it in eval mode.

    Every linear layer (`nn.Linear`, routed through oneDNN or packed for it) becomes an
    `Int8Linear`; with `output_layer`, the pre-softmax linear transformation too (the Transformer's
    `output_layer`, put in place from outside). The model must be on the CPU, and its weights
    finite: a NaN or an infinity would make every input's 8-bit range meaningless (a one-line error
    naming the model, `name`, and the weight). Quantising an already quantised model does nothing.
    `path` defaults to `choose_int8_path()`.
    """
    if is_int8(model):
        return model
    check_int8_device(next(model.parameters()).device)
    bad = next((n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())), None)
    if bad is not None:
        raise AiaynError(f"{name}: its weight {bad} is not finite (NaN or infinity): int8 cannot quantise it")
    path = path or choose_int8_path()
    model.eval()
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear | PackedLinear):  # float32 layers, however they compute
                setattr(module, name, Int8Linear(child.weight, child.bias, path))
    if output_layer and hasattr(model, "output_weight"):
        model.output_layer = Int8Linear(model.output_weight, model.output_bias, path)
    return model
