"""The model's matrix products (the projections of 3.2.2, Eq. 2 and the pre-softmax linear of 3.4),
routed through oneDNN on the CPU. The model's own layers compute with `F.linear`; `route_linears`
swaps them, from outside, for layers that call `linear` (training and `Translator.load` do).

PyTorch computes `F.linear` on the CPU with MKL's sgemm, which on AMD processors runs a slower code
path than on Intel's; oneDNN (shipped inside PyTorch) has its own AVX-512 kernels and runs the same
float32 products 1.5-3x faster there (BENCHMARKS.md). `linear` is `F.linear` with that routing for
float32 CPU tensors of at least `MIN_ROWS` rows, forward and backward (an autograd Function whose
three products, y = x W^T + b, dx = dy W, dW = dy^T x, all go through oneDNN); everything else
(GPUs, other dtypes, autocast, torch.compile, a single decoding row) takes `F.linear` unchanged.
Results equal `F.linear`'s up to float32 rounding (summation order).

oneDNN builds and keeps a primitive (JIT-compiled kernels and buffers, ~0.6-2 MB) for every shape it
meets, and token-bucketed batches have a different number of rows almost every step: a tiny
training run's memory grew past 6 GB in an hour. So the rows are padded with zeros to one of 32
sizes per power of two (`padded_rows`: at most 1/32 more work), which bounds the shapes and the
memory; the padding rows are dropped from the results and add nothing to the weight gradient.

Which is faster depends on the CPU, not on its vendor: on an AMD EPYC with AVX-512 oneDNN ran
training 1.5-3x faster; on a first-generation Zen (AVX2 only) MKL ran whole training updates 10-20%
faster although oneDNN won most single products in isolation. So training measures it
(`aiayn.runtime.kernels`: real updates timed with each, the winner kept in the checkpoint), and
`linear_backend.reason` says what decided. `AIAYN_ONEDNN=0` (never) or `=1` (always) in the
environment overrides the measurement; `linear_backend.enabled = False` turns the routing off.
"""

from __future__ import annotations

import bisect
import os
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.errors import AiaynError
from aiayn.model.embedding import OutputLayer
from aiayn.model.layers import FeedForward

MIN_ROWS = 4  # below this oneDNN's per-call overhead outweighs its faster kernels (one decoding row)
EXACT_ROWS = 64  # up to this many rows shapes are used as they are; above, 32 sizes per octave


def _onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class _Backend:
    """Whether `linear` may use oneDNN (a flag tests, benchmarks and training's measurement flip)."""

    def __init__(self) -> None:
        forced = os.environ.get("AIAYN_ONEDNN", "").strip()
        self.forced = forced in ("0", "1")  # the environment decides, not a measurement
        if not _onednn_available():
            self.enabled, self.reason = False, "oneDNN is not in this PyTorch build: F.linear"
        elif self.forced:
            self.enabled, self.reason = forced == "1", f"AIAYN_ONEDNN={forced} in the environment"
        else:
            ignored = f" (AIAYN_ONEDNN={forced!r} is not 0 or 1: ignored)" if forced else ""
            self.enabled, self.reason = (
                True,
                (
                    f"oneDNN by default; training measures both, decoding times MKL against packed oneDNN"
                    f" per weight shape and row count{ignored}"
                ),
            )

    @property
    def name(self) -> str:
        return "onednn" if self.enabled else "mkl"

    def choose(self, name: str, reason: str) -> None:
        """Use oneDNN (`name` 'onednn') or F.linear ('mkl') from now on, and say why."""
        if name not in ("onednn", "mkl"):
            raise AiaynError(f"matrix-product backend {name!r} is not onednn or mkl")
        self.enabled, self.reason = name == "onednn" and _onednn_available(), reason


linear_backend = _Backend()


def _mm(a: Tensor, b_t: Tensor, bias: Tensor | None = None) -> Tensor:
    """a (m, k) @ b_t^T where b_t is (n, k), plus bias (n,): oneDNN's inner-product primitive."""
    return torch.ops.mkldnn._linear_pointwise(a, b_t, bias, "none", [], "")


def padded_rows(rows: int) -> int:
    """`rows` rounded up to a multiple of 2^(floor(log2 rows) - 5): 32 sizes per power of two."""
    if rows <= EXACT_ROWS:
        return rows
    step = 1 << (rows.bit_length() - 6)
    return -(-rows // step) * step


def _pad_rows(t: Tensor) -> Tensor:
    """t (rows, n) -> (padded_rows(rows), n), zeros below."""
    extra = padded_rows(t.size(0)) - t.size(0)
    return F.pad(t, (0, 0, 0, extra)) if extra else t


def _weight_grad(g: Tensor, x2: Tensor) -> Tensor:
    """dW = g^T x for g (rows, out), x2 (rows, in) -> (out, in).

    oneDNN copies a transposed first operand but reads a transposed second one in place, so the
    larger of the two goes second: for out > in this computes (x^T g)^T and returns that view.
    """
    if g.size(1) > x2.size(1):
        return _mm(x2.t(), g.t()).t()
    return _mm(g.t(), x2.t())


class _OneDNNLinear(torch.autograd.Function):
    """y = x W^T + b with all three products of forward and backward computed by oneDNN."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        rows = x.numel() // x.size(-1)
        x2 = _pad_rows(x.reshape(rows, x.size(-1)))  # (padded rows, in)
        ctx.save_for_backward(x2, weight)
        ctx.has_bias, ctx.rows = bias is not None, rows
        return _mm(x2, weight, bias)[:rows].view(*x.shape[:-1], weight.size(0))  # (..., out)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x2, weight = ctx.saved_tensors
        g = grad.reshape(ctx.rows, grad.size(-1))  # (rows, out)
        need_x, need_w, need_b = ctx.needs_input_grad
        db = g.sum(0) if need_b and ctx.has_bias else None  # (out,)
        g = _pad_rows(g)  # (padded rows, out)
        dx = _mm(g, weight.t())[: ctx.rows].view(*grad.shape[:-1], weight.size(1)) if need_x else None
        dw = _weight_grad(g, x2) if need_w else None  # (out, in)
        return dx, dw, db


def _use_onednn(x: Tensor, weight: Tensor) -> bool:
    return (
        linear_backend.enabled
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and weight.layout == torch.strided
        and x.dim() >= 2
        and x.numel() >= MIN_ROWS * x.size(-1) > 0
        and not torch.is_autocast_enabled("cpu")
        and not torch.compiler.is_compiling()
    )


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`F.linear(x, weight, bias)`: x (..., in), weight (out, in), bias (out,) -> (..., out)."""
    if _use_onednn(x, weight):
        return _OneDNNLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


class RoutedLinear(nn.Linear):
    """An `nn.Linear` computed by `linear`; `route_linears` puts it in place of the plain one."""

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in) -> (..., out)."""
        return linear(x, self.weight, self.bias)


class RoutedOutputLayer(OutputLayer):
    """The pre-softmax linear transformation (3.4) computed by `linear`."""

    def forward(self, h: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """h (..., d_model) -> (..., vocab)."""
        return linear(h, weight, bias)


def _routed(layer: nn.Linear) -> RoutedLinear:
    """A RoutedLinear holding `layer`'s own Parameters (so ties, optimizers and names stay put)."""
    routed = RoutedLinear(layer.in_features, layer.out_features, layer.bias is not None, device="meta")
    routed.weight, routed.bias = layer.weight, layer.bias
    return routed


def route_linears(model: nn.Module) -> nn.Module:
    """Compute `model`'s matrix products through `linear`, in place; returns `model`.

    Every plain `nn.Linear` (the projections of 3.2.2, the two layers of Eq. 2) becomes a
    `RoutedLinear` and a Transformer's pre-softmax layer (3.4) a `RoutedOutputLayer`. The Parameters
    are the same objects in the same order: the state dict, a checkpoint's optimizer state and the
    tied embeddings are unchanged. Training calls it (and `pack_for_inference`); an unrouted model
    computes with `F.linear`. Other modules (int8 or packed layers) are left as they are; hooks on
    a replaced layer are not carried over (add them after routing).
    """
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, _routed(child))
            elif type(child) is OutputLayer:
                setattr(module, name, RoutedOutputLayer())
    return model


KERNELS = ("mkl", "packed", "panels")  # F.linear; oneDNN's packed weight; the native panels (below)
ROW_PROBES = (1, 4, 32, 128)  # one row; one sentence's beams; a batch of sentences; a batch of beams
_ROW_BOUNDS = (2, 12, 64)  # between the probes, in log scale: a row count takes its nearest probe's kernel


# One row (a sentence's greedy step) takes the panels untimed (packed where the library is not built):
# they are the fastest for one row on the CPUs measured (docs/performance.md, BENCHMARKS.md).
ONE_ROW: str | None = "panels"  # None: timed like the other row classes (benchmarks/packed_memory.py)


def panels_available() -> bool:
    """Whether the native panel product (aiayn/runtime/native_panels.h) is built and loaded here, and
    fast on this CPU (on x86, AVX2 and FMA: without FMA its std::fma is a library call)."""
    from aiayn.runtime import native_build  # the library registers torch.ops.aiayn on loading

    return native_build.load() and bool(torch.ops.aiayn.panels_fast())


def row_class(rows: int) -> int:
    """Which of ROW_PROBES a product of `rows` rows is timed as (its index)."""
    return bisect.bisect_right(_ROW_BOUNDS, rows)


class PackedLinear(nn.Module):
    """Inference-only y = x W^T + b computed by the kernel that measured fastest for its row count.

    For decoding on the CPU, where every step reads every weight for a few rows: which kernel is
    fastest differs by CPU, shape and row count, not monotonically (Cascade Lake, 256 x 256 at 4
    rows: MKL 19 us, packed 71; 256 x 8000 at 32 rows: MKL 2.4 ms, packed 1.0; at 128 MKL again).
    At one to a few rows both pay 30-130 us a call, and the native panels (native_panels.h: the
    weight streamed once for all rows, each row's sum in one order whatever the row count) cost
    what reading the weight costs. So `pack_for_inference` times the `KERNELS` at each of
    ROW_PROBES but one row (`ONE_ROW`) and sets `kernels`; a call takes its row class's. oneDNN's
    blocked weight (`packed`) and the panels are kept only where a row class uses them; rows above
    EXACT_ROWS are padded for oneDNN as in `linear` (few cached primitives). No gradients.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None, kernels: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.weight, self.bias = weight, bias  # the model's own parameters: still counted, still saved
        self.packed: Tensor | None = None
        self.panels: Tensor | None = None
        self.keep(kernels or ("packed",) * len(ROW_PROBES))

    def keep(self, kernels: tuple[str, ...]) -> None:
        """Compute with `kernels` (one of KERNELS per row class) from now on; the weight is packed
        (reordered once for oneDNN) and put in panels only while some row class uses them."""
        self.kernels = kernels
        weight = self.weight.detach().float().contiguous()
        if "packed" not in kernels:
            self.packed = None
        elif self.packed is None:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 64)
        if "panels" not in kernels:
            self.panels = None
        elif self.panels is None:
            self.panels = torch.ops.aiayn.pack_panels(weight)  # (out / 16, in, 16)

    def forward(self, x: Tensor, *model_weights: Tensor | None) -> Tensor:
        """x (..., in) float32 on the CPU -> (..., out). As a Transformer's pre-softmax layer it is
        also passed the model's output weight and bias (`model_weights`): its own already."""
        rows = x.numel() // x.size(-1)
        kernel = self.kernels[row_class(rows)]
        if kernel == "mkl":
            return F.linear(x, self.weight, self.bias)
        if kernel == "panels":
            return self.panel_product(x, rows)
        return self.packed_product(x, rows)

    def packed_product(self, x: Tensor, rows: int) -> Tensor:
        """x (..., in) with `rows` rows -> (..., out), through the packed weight."""
        x2 = _pad_rows(x.reshape(rows, x.size(-1)))  # (padded rows, in)
        y = torch.ops.mkldnn._linear_pointwise(x2, self.packed, self.bias, "none", [], "")
        return y[:rows].view(*x.shape[:-1], self.out_features)

    def panel_product(self, x: Tensor, rows: int, relu: bool = False) -> Tensor:
        """x (..., in) with `rows` rows -> (..., out), through the panels (max(0, .) if `relu`)."""
        x2 = x.reshape(rows, x.size(-1))  # (rows, in)
        y = torch.ops.aiayn.panel_linear(x2, self.panels, self.out_features, self.bias, relu)
        return y.view(*x.shape[:-1], self.out_features)


def _best_seconds(calls: dict, budget: float = 0.02) -> dict[str, float]:
    """The fastest of 2-5 timed calls of each of `calls` (name: function), taken in turn (so that a
    moment in which the machine runs slow costs each alike; more rounds while they take under
    `budget` seconds in all), after one untimed call each that builds oneDNN's primitive."""
    best = {name: float("inf") for name in calls}
    for fn in calls.values():
        fn()
    spent, runs = 0.0, 0
    while runs < 5 and (runs < 2 or spent < budget):
        for name, fn in calls.items():
            start = time.perf_counter()
            fn()
            took = time.perf_counter() - start
            best[name], spent = min(best[name], took), spent + took
        runs += 1
    return best


def _kernels(layer: PackedLinear) -> tuple[str, ...]:
    """The fastest of KERNELS for `layer`'s weight at each of ROW_PROBES rows, timed on this machine
    (the panels where the native library is built); one row takes `ONE_ROW` (None: timed too)."""
    panels = panels_available()
    chosen = [] if ONE_ROW is None else [ONE_ROW if panels or ONE_ROW != "panels" else "packed"]
    if panels:
        layer.keep(("packed", "panels"))
    with torch.inference_mode():
        for rows in ROW_PROBES[len(chosen) :]:
            x = torch.randn(rows, layer.in_features)
            calls = {
                "mkl": lambda x=x: F.linear(x, layer.weight, layer.bias),
                "packed": lambda x=x, rows=rows: layer.packed_product(x, rows),
            }
            if panels:
                calls["panels"] = lambda x=x, rows=rows: layer.panel_product(x, rows)
            seconds = _best_seconds(calls)
            chosen.append(min(calls, key=seconds.__getitem__))
    return tuple(chosen)


class PackedFeedForward(nn.Module):
    """Eq. 2 for inference over a FeedForward whose layers are `PackedLinear`s: with ReLU and both
    products on the packed weight for the row count, ReLU is oneDNN's post-op of the first and the
    rows are padded once for both; with both on the panels ReLU is applied as the first stores its
    outputs; otherwise each layer takes its own kernel and ReLU runs in place (the hidden (rows,
    d_ff) never copied: docs/history.md). Other activations run as the model's,
    other layers (int8, swapped in later) as they are."""

    def __init__(self, linear1: PackedLinear, linear2: PackedLinear, activation) -> None:
        super().__init__()
        self.linear1, self.linear2, self.activation = linear1, linear2, activation
        self.relu = activation is F.relu

    def forward(self, x: Tensor) -> Tensor:
        """x (..., d_model) -> (..., d_model)."""
        rows = x.numel() // x.size(-1)
        first, second = self.linear1, self.linear2  # quantize_int8 may have replaced them since
        c = row_class(rows)
        kernels = {m.kernels[c] if isinstance(m, PackedLinear) else "" for m in (first, second)}
        if self.relu and kernels == {"panels"}:
            return second.panel_product(first.panel_product(x, rows, relu=True), rows)
        if self.relu and kernels == {"packed"}:
            x2 = _pad_rows(x.reshape(rows, x.size(-1)))  # (padded rows, d_model)
            h = torch.ops.mkldnn._linear_pointwise(x2, first.packed, first.bias, "relu", [], "")
            y = torch.ops.mkldnn._linear_pointwise(h, second.packed, second.bias, "none", [], "")
            return y[:rows].view(*x.shape[:-1], second.out_features)
        h = first(x)  # (..., d_ff), this call's own tensor
        return second(h.relu_() if self.relu else self.activation(h))


def _pack_feed_forwards(model: nn.Module) -> None:
    """Put a `PackedFeedForward` in place of every FeedForward whose two layers are packed."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, FeedForward) and all(
                isinstance(layer, PackedLinear) for layer in (child.linear1, child.linear2)
            ):
                setattr(module, name, PackedFeedForward(child.linear1, child.linear2, child.activation))


def row_invariant(*modules: nn.Module) -> int:
    """Make every `PackedLinear` in `modules` take one kernel whose rows' bits do not depend on the
    row count for every row count (the native panels, else oneDNN's packed weight), so a batch's rows
    compute what they would in any other batch. Speculative decoding's teacher needs it in its
    decoder and output layer (aiayn.decode.speculative); re-attach a native decoder after. Returns
    how many layers."""
    layers = [m for module in modules for m in module.modules() if isinstance(m, PackedLinear)]
    kernel = "panels" if panels_available() else "packed"
    for layer in layers:
        layer.keep((kernel,) * len(ROW_PROBES))
    return len(layers)


def pack_for_inference(model: nn.Module) -> int:
    """Route a Transformer's products through `linear` (`route_linears`), then, on a float32 CPU
    model, make every linear layer and the output layer a `PackedLinear` computing with the kernel
    per row count that measures fastest on this machine (`_kernels`), timed once per weight shape,
    and every feed-forward network a `PackedFeedForward`. Returns how many layers use the packed
    weight for some row counts. For `Translator.load`; training never packs.
    """
    route_linears(model)
    weight = getattr(model, "output_weight", None)
    if weight is None or not linear_backend.enabled or weight.device.type != "cpu":
        return 0
    if weight.dtype != torch.float32:
        return 0
    targets = [
        (module, name, child.weight, child.bias)
        for module in list(model.modules())
        for name, child in module.named_children()
        if isinstance(child, nn.Linear)
    ] + [(model, "output_layer", model.output_weight, model.output_bias)]
    decided: dict[tuple[int, int], tuple[str, ...]] = {}
    for module, name, w, b in targets:
        shape = tuple(w.shape)
        if shape not in decided:
            decided[shape] = _kernels(PackedLinear(w, b))
        setattr(module, name, PackedLinear(w, b, decided[shape]))
    _pack_feed_forwards(model)
    return sum(isinstance(m, PackedLinear) and m.packed is not None for m in model.modules())
