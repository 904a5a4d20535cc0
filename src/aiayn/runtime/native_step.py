"""The decoder's incremental step (3.1, decoding with cached keys and values) as one native call.

A decoding step on the CPU runs about 30 small operations per decoder layer for a few rows; each
costs 10-20 us of Python besides its kernel, as much again as the matrix products at the tiny
preset's size (BENCHMARKS.md, "Session 15"). `native_step.cpp` runs the layers from C++, with the
kernels `pack_for_inference` chose for the products (MKL through `at::linear`, oneDNN on packed
weights with ReLU fused there, the native panels for a few rows; FBGEMM's int8 products of
`quantize_int8`); Eq. 1 is written out for each row and head (`native_attention.h`) where the
Python step calls PyTorch's fused kernel. Its logits equal the Python step's up to float32
summation order (tests/runtime/test_native_step.py). `native_build` builds and loads the library.
`torch.compile` of the Python step does not replace it: on the tiny model (32 sentences, greedy,
one thread, a 2-core AMD EPYC VM with AVX2) a compiled step cost 12.09 ms, the Python step 12.11 and
this one 9.32, after 371 s of compiling for the shapes a search meets (dynamo cannot trace the
oneDNN-packed weights, so the compiled model had plain ones).

`NativeDecoder.extend` (`decode_positions`) feeds several new positions per row in one call:
speculative decoding's check (aiayn.decode.ragged, aiayn.decode.speculative).

`attach_native_decoder(model)` gives a float32 (or int8) CPU Transformer a native decoder, kept
here (the model knows nothing of it); `decode_step(model, tokens, state)`, which the search's
stepper calls, runs it when decoding without gradients, in eval mode, and `model.decode_step`
otherwise. It holds the model's weights by reference: attach after the weights are final
(`Translator.load` does). A model with an attention window (`aiayn.model.window`) is declined: its
decoder keeps a ring buffer of the window's keys and values, which the native step does not read.
A layer or Parameter put in place of one of the model's, or a weight
moved or cast, sends decoding back to Python; a copy or a pickle of the model decodes in Python
until attached again. Any failure after the library is loaded (building the decoder, its first
one-row step, a later step) leaves decoding in Python, with the reason.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable

import torch
from torch import Tensor, nn

from aiayn.model.embedding import OutputLayer
from aiayn.model.transformer import DecoderState, Transformer
from aiayn.runtime import native_build
from aiayn.runtime.linear import KERNELS, ROW_PROBES, PackedLinear, padded_rows, row_class
from aiayn.runtime.native_build import native_status
from aiayn.runtime.quantize import Int8Linear

__all__ = [
    "NativeDecoder",
    "attach_native_decoder",
    "decode_positions",
    "decode_step",
    "search_steps",
    "native_decoder",
    "native_status",
    "propose_tokens",
    "restricted_native",
]
FALLBACK = "decoding steps run in Python"

# The modules each NativeDecoder computes, watched: a layer or Parameter put in place of one of theirs
# (quantising from outside, say) leaves the decoder stale, and decoding goes back to Python.
_watched: weakref.WeakKeyDictionary[nn.Module, NativeDecoder] = weakref.WeakKeyDictionary()
_attached: weakref.WeakKeyDictionary[nn.Module, NativeDecoder] = weakref.WeakKeyDictionary()  # model: its own


def _on_registration(module: nn.Module, name: str, value) -> None:
    native = _watched.get(module)
    if native is not None:
        native.stale = True


torch.nn.modules.module.register_module_module_registration_hook(_on_registration)
torch.nn.modules.module.register_module_parameter_registration_hook(_on_registration)


class NativeDecoder:
    """A Transformer's decoder as one native object holding (by reference) the model's weights;
    `watch=False` for one that lives only as long as a batch (a shortlist's, `restricted_native`),
    which leaves the model's own decoder the one its modules report to."""

    def __init__(self, decoder: torch.ScriptObject, model: Transformer, watch: bool = True) -> None:
        self._decoder = decoder
        self.stale = False  # set when one of the watched modules gets a new layer or Parameter
        # Every float tensor it reads, with where its data was: `.to`, `.half` or `param.data = ...`
        # move it, and then the model decodes in Python again.
        held = [*model.decoder.parameters(), model.output_weight, model.output_bias]
        self._held = [(p, p.data_ptr()) for p in held if p is not None]
        self._layers = len(model.decoder.layers)
        self._checked: weakref.ref | None = None  # the search (its DecoderState) last found valid
        for module in [model, *model.decoder.modules(), model.output_layer] if watch else []:
            _watched[module] = self

    def valid_for(self, model: Transformer) -> bool:
        """Whether it still computes `model`'s own layers and weights: none replaced by a new layer
        or Parameter, removed, or moved or cast (`.to`, `.half`, `param.data = ...`)."""
        if self.stale or len(model.decoder.layers) != self._layers:
            return False
        return all(p.data_ptr() == where for p, where in self._held)

    def valid_during(self, model: Transformer, state: DecoderState) -> bool:
        """`valid_for(model)`, its weights compared once per search (per `state`): a search's steps
        run back to back, and comparing ~60 data pointers cost 40-120 us a step. A layer or
        Parameter replaced meanwhile still counts (`stale`)."""
        if self._checked is not None and self._checked() is state:
            return not self.stale
        valid = self.valid_for(model)
        self._checked = weakref.ref(state) if valid else None
        return valid

    def step(self, x: Tensor, state: DecoderState) -> Tensor:
        """x (rows, d_model), the embedded tokens at `state.step` -> logits (rows, vocab); appends
        this step's keys and values to `state.self_kv`."""
        caches, rows = state.self_kv, x.size(0)
        length = caches[0].length if caches else state.step
        logits = self._decoder.step(
            x,
            [c.k for c in caches],
            [c.v for c in caches],
            length,
            [k for k, _ in state.cross_kv],
            [v for _, v in state.cross_kv],
            state.memory_mask,
            row_class(rows),  # which kernel each product takes: aiayn.runtime.linear's decision
            padded_rows(rows),
        )
        for cache in caches:
            cache.length = length + 1
        return logits

    def extend(self, x: Tensor, lengths: Tensor, state: DecoderState) -> Tensor:
        """x (rows, m, d_model): the embedded tokens of row r at positions lengths[r] ..
        lengths[r] + m - 1, lengths (rows,) int64 on the CPU the positions its caches hold ->
        logits (rows, m, vocab); writes the m positions' keys and values into `state.self_kv` and
        leaves the lengths to the caller (aiayn.decode.ragged). The products take the kernel
        a single step of these rows takes: the panels give a row the same bits whatever the number
        of rows, and each position attends over exactly its own prefix as a single step does, so
        with the panels the logits are the single steps' (tests/runtime/test_native_extend.py;
        tests/decode/test_speculative.py for rows of different lengths)."""
        rows, m = x.shape[:2]
        return self._decoder.extend(x, lengths, *_caches(state), row_class(rows), padded_rows(rows * m))

    def propose(
        self, x: Tensor, lengths: Tensor, newest: Tensor, k: int, model: Transformer, banned: Tensor,
        state: DecoderState, ids: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        """A draft's greedy proposals: `extend` over x (rows, q, d_model), then k - 1 single
        positions, each the token just chosen (row r's first choice follows its token newest[r]
        (rows,) of x; `banned` (ids,) never chosen; `ids` (columns,) the target id of each output
        column where the output layer is a shortlist's) -> (rows, k) int64 columns. Each row's caches then
        hold lengths + newest + k positions, the last proposal not yet read."""
        rows, m = x.shape[:2]
        embed, table = (
            model.tgt_embed,
            model.tgt_pos(int((lengths + newest).max()) + k),
        )  # (positions, d_model)
        return self._decoder.propose(
            x, lengths, newest, k, embed.weight.detach(), embed.scale, table, banned, ids, *_caches(state),
            row_class(rows), padded_rows(rows * m), padded_rows(rows),
        )  # fmt: skip

    def greedy(
        self, model: Transformer, tokens: Tensor, sums: Tensor, first_step: int, steps: int, caps: Tensor,
        eos: int, banned: Tensor, state: DecoderState, ids: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        """Up to `steps` steps of greedy search in one call: tokens (rows,) at `state.step`, the log P
        so far sums (rows,) float32, the search's step number `first_step`, caps (rows,) the step
        after which a row may only choose `eos`, `banned` (ids,) columns never chosen, `ids`
        (columns,) where the output layer is a shortlist's -> (chosen (rows, s), running sums
        (rows, s)), s <= steps, ending at the first step some row chose EOS; the state advanced s."""
        head = (tokens, sums, first_step, caps, eos, banned)
        chosen, running = self._run("greedy", model, state, ids, steps, *head)
        self._advance(state, chosen.size(1))
        return chosen, running

    def beam(
        self, model: Transformer, tokens: Tensor, beams: list[Tensor], first_step: int, steps: int,
        n_best: int, eos: int, banned: Tensor, style: str, alpha: float, state: DecoderState,
        ids: Tensor | None = None,
    ) -> list[Tensor]:  # fmt: skip
        """Up to `steps` steps of beam search in one call: tokens (n * k,) at `state.step`, `beams`
        the Beams' max_lens and six tensors (aiayn.decode.beam), the search's step number
        `first_step`, the rules' eos, banned columns, length penalty style and alpha, n_best; `ids`
        as in `greedy` -> the six Beams tensors, rows (n * k,) each survivor's row, last (n * k,)
        its token, done (n,), and the steps taken (0-d), ending at the first step some sentence is
        done (its rows not reordered); the state advanced that many steps."""
        head = (tokens, beams, first_step, n_best, eos, banned, style, alpha)
        found = self._run("beam", model, state, ids, steps, *head)
        self._advance(state, int(found[-1]))
        return found

    def _run(self, method: str, model: Transformer, state: DecoderState, ids, steps: int, *head):
        """The native `method` called with `head` (its search's arguments, tokens first), then the
        steps (capped at the caches' room: a step past it fails in Python, as a single step would),
        the target embeddings and positions, `ids`, and the state's caches."""
        caches, rows = state.self_kv, head[0].size(0)
        length = caches[0].length if caches else state.step
        if caches:
            steps = max(1, min(steps, caches[0].k.size(2) - length))
        embed, table = model.tgt_embed, model.tgt_pos(steps, state.step)  # (steps, d_model)
        keys, values, cross_k, cross_v, mask = _caches(state)
        return getattr(self._decoder, method)(
            *head, steps, embed.weight.detach(), embed.scale, table, ids, keys, values, length, cross_k,
            cross_v, mask, row_class(rows), padded_rows(rows),
        )  # fmt: skip

    @staticmethod
    def _advance(state: DecoderState, steps: int) -> None:
        """The state and its caches hold `steps` more positions."""
        for cache in state.self_kv:
            cache.length += steps
        state.step += steps


def search_steps(
    method: str, model: Transformer, state: DecoderState, restricted: NativeDecoder | None, *args
) -> tuple | list | None:
    """`NativeDecoder.greedy` or `.beam` (`method`) of the model's native decoder (or `restricted`, a
    shortlist's, given its ids as the last of `args`) where it is attached and valid, without
    gradients, in eval mode; None otherwise (the search then takes its steps one by one). A native
    call that fails says why (a RuntimeWarning) and leaves the model decoding in Python."""
    native = _attached.get(model)
    if native is None or model.training or torch.is_grad_enabled() or not native.valid_during(model, state):
        return None
    if restricted is not None and restricted.stale:
        return None
    *given, ids = args
    try:
        return getattr(restricted or native, method)(model, *given, state, ids)
    except RuntimeError as e:
        if restricted is None:
            _attached.pop(model, None)
        else:
            restricted.stale = True
        warnings.warn(f"the native step failed ({_first_line(e)}): {FALLBACK}", RuntimeWarning, stacklevel=2)
        return None


def _caches(state: DecoderState) -> tuple:
    """The caches' keys and values, the encoder's and the source mask, as the native calls take them."""
    caches = state.self_kv
    return (
        [c.k for c in caches],
        [c.v for c in caches],
        [k for k, _ in state.cross_kv],
        [v for _, v in state.cross_kv],
        state.memory_mask,
    )


def native_decoder(model: nn.Module) -> NativeDecoder | None:
    """The native decoder attached to `model`, while it still computes the model's own layers."""
    native = _attached.get(model)
    return native if native is not None and native.valid_for(model) else None


def decode_step(model: Transformer, tokens: Tensor, state: DecoderState) -> Tensor:
    """`model.decode_step(tokens, state)`: tokens (rows,) -> logits (rows, vocab), the state advanced;
    the decoder's layers and the output layer as one native call where a native decoder is attached
    and still valid, without gradients, in eval mode. A native step that fails where the Python step
    does not runs in Python, and so do the model's later steps (a RuntimeWarning says why)."""
    native = _attached.get(model)
    if native is None or model.training or torch.is_grad_enabled() or not native.valid_during(model, state):
        return model.decode_step(tokens, state)
    try:
        logits = native.step(model.embed_step(tokens, state), state)  # checks all before writing
    except RuntimeError as e:
        logits = model.decode_step(tokens, state)  # raises too where the input is at fault
        _attached.pop(model, None)
        warnings.warn(f"the native step failed ({_first_line(e)}): {FALLBACK}", RuntimeWarning, stacklevel=2)
        return logits
    state.step += 1
    return logits


def decode_positions(
    model: Transformer, tokens: Tensor, lengths: Tensor, state: DecoderState, python: Callable[[], Tensor]
) -> Tensor:
    """tokens (rows, m) of row r at positions lengths[r] .. lengths[r] + m - 1 (lengths (rows,) on
    the CPU) -> logits (rows, m, vocab), the m positions' keys and values written into the caches:
    one native call (`NativeDecoder.extend`) where a native decoder is attached and valid, without
    gradients, in eval mode, and `python()` otherwise (aiayn.decode.ragged). A native call that
    fails where Python does not leaves the model decoding in Python (a RuntimeWarning says why)."""
    native = _attached.get(model)
    if native is None or model.training or torch.is_grad_enabled() or not native.valid_during(model, state):
        return python()
    positions = lengths[:, None].to(tokens.device) + torch.arange(tokens.size(1), device=tokens.device)
    try:
        return native.extend(model.embed_tokens(tokens, positions), lengths, state)  # checks before writing
    except RuntimeError as e:
        logits = python()  # raises too where the input is at fault
        _attached.pop(model, None)
        warnings.warn(f"the native step failed ({_first_line(e)}): {FALLBACK}", RuntimeWarning, stacklevel=2)
        return logits


def propose_tokens(
    model: Transformer, tokens: Tensor, lengths: Tensor, newest: Tensor, k: int, banned: Tensor,
    state: DecoderState,
) -> Tensor | None:  # fmt: skip
    """A draft's k greedy proposals per row in one native call (`NativeDecoder.propose`): tokens
    (rows, q) of row r at lengths[r] .. (lengths (rows,) on the CPU), its newest at newest[r] ->
    (rows, k); None where the model decodes in Python (the caller then proposes step by step). A
    native call that fails says why (a RuntimeWarning) and leaves the model decoding in Python."""
    native = _attached.get(model)
    if native is None or model.training or torch.is_grad_enabled() or not native.valid_during(model, state):
        return None
    positions = lengths[:, None] + torch.arange(tokens.size(1))  # (rows, q)
    try:
        return native.propose(model.embed_tokens(tokens, positions), lengths, newest, k, model, banned, state)
    except RuntimeError as e:
        _attached.pop(model, None)
        warnings.warn(f"the native step failed ({_first_line(e)}): {FALLBACK}", RuntimeWarning, stacklevel=2)
        return None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _add_linear(native: torch.ScriptObject, layer: nn.Module, weight=None, bias=None) -> bool:
    """Give `native` one linear layer; False for a kind it cannot compute."""
    if isinstance(layer, Int8Linear):
        native.add_int8(layer._packed)
        return True
    if isinstance(layer, PackedLinear):
        kernels = [KERNELS.index(kernel) for kernel in layer.kernels]
        native.add_float(layer.weight.detach(), _detached(layer.bias), layer.packed, layer.panels, kernels)
        return True
    if isinstance(layer, nn.Linear):
        weight, bias = layer.weight, layer.bias
    elif not isinstance(layer, OutputLayer):
        return False
    native.add_float(weight.detach(), _detached(bias), None, None, [KERNELS.index("mkl")] * len(ROW_PROBES))
    return True


def _detached(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach()


def _native_of(model: Transformer) -> torch.ScriptObject | str:
    """The native decoder of `model`'s decoder and output layer, or why it cannot be built."""
    c = model.config
    native = torch.classes.aiayn.NativeDecoder(
        c.n_heads, c.key_dim, c.value_dim, c.norm_first, c.activation, c.layer_norm_eps
    )
    for layer in model.decoder.layers:
        a, x = layer.self_attn, layer.cross_attn
        for linear in (a.qkv_proj, a.out_proj, x.q_proj, x.out_proj, layer.ffn.linear1, layer.ffn.linear2):
            if not _add_linear(native, linear):
                return f"a layer of kind {type(linear).__name__}"
        for res in (layer.self_res, layer.cross_res, layer.ffn_res):
            native.add_norm(res.norm.weight.detach(), res.norm.bias.detach())
    if model.decoder.norm is not None:
        native.add_norm(model.decoder.norm.weight.detach(), model.decoder.norm.bias.detach())
    if not _add_linear(native, model.output_layer, model.output_weight, model.output_bias):
        return f"an output layer of kind {type(model.output_layer).__name__}"
    return native


def restricted_native(model: Transformer, layer: nn.Module, weight: Tensor, bias: Tensor | None):
    """A NativeDecoder of `model`'s decoder with `layer` (weight (kept, d_model), bias) as its output
    layer (a shortlist's rows: aiayn.decode.shortlist), valid while the model's own native decoder
    is (its layers shared with it); None where the model decodes in Python."""
    own = native_decoder(model)
    if own is None:
        return None
    native = own._decoder.without_output()
    return NativeDecoder(native, model, watch=False) if _add_linear(native, layer, weight, bias) else None


def attach_native_decoder(model: Transformer) -> str:
    """Attach a native decoder to `model` (a Transformer) where the native step can run it; returns
    "native", or why not (and the model decodes in Python)."""
    _attached.pop(model, None)
    weight = model.output_weight
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        return "not a float32 CPU model"
    if (
        model.config.attention_window is not None
    ):  # its step keeps every position: the window cache is Python's
        return f"a windowed model (attention_window={model.config.attention_window}): {FALLBACK}"
    if not native_build.load():
        return native_build.reason()
    try:
        native = _native_of(model)
        if isinstance(native, str):
            return native
        decoder = NativeDecoder(native, model)
        with torch.inference_mode():  # one step of one row: what this PyTorch cannot run fails here
            memory = weight.new_zeros(1, 1, model.config.d_model)
            decoder.step(memory[:, 0], model.start_decoding(memory, None, 1))
    except Exception as e:  # anything after loading (the library's checks, its first step): Python
        return f"the native decoder failed ({_first_line(e)}): {FALLBACK}"
    _attached[model] = decoder
    return "native"
