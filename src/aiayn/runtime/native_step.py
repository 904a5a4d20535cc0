"""The decoder's incremental step (3.1, decoding with cached keys and values) as one native call.

A decoding step on the CPU runs about 30 small operations per decoder layer for a few rows; each
costs 10-20 us of Python besides its kernel, as much again as the matrix products at the tiny
preset's size (docs/performance.md, "The native decoding step"). `native_step.cpp` runs the layers
from C++, with the kernels `pack_for_inference` chose for the products (MKL through `at::linear`,
oneDNN on packed weights with ReLU fused there, the native panels for a few rows; FBGEMM's int8
products of `quantize_int8`); Eq. 1 is written out for each row and head (`native_attention.h`) where the
Python step calls PyTorch's fused kernel. Its logits equal the Python step's up to float32
summation order (tests/runtime/test_native_step.py). `native_build` builds and loads the library.
`torch.compile` of the Python step does not replace it (measured in docs/performance.md: no faster
than the Python step after minutes of compiling; dynamo cannot trace the oneDNN-packed weights).

`NativeDecoder.extend` (`decode_positions`) feeds several new positions per row in one call:
speculative decoding's check (aiayn.decode.ragged, aiayn.decode.speculative).

This module is the one boundary between Python and C++. What crosses is typed, each object named
field by field and made once: a search's rules (`native_rules`: native_rules.h) and target side
(`native_target`) bound to the decoder in one `Search` when the search starts (`NativeSearch`: greedy
and beam search's steps in runs), the beam state as one `BeamState`, the decoder's caches as one
`Caches` (kept with the `DecoderState`); no call takes more than eight arguments. A native call that
fails turns decoding to Python at one guard (`fallback`): the Python step answers instead, the
decoder is given up, and a RuntimeWarning says why.

`attach_native_decoder(model)` gives a float32 (or int8) CPU Transformer a native decoder, kept
here (the model knows nothing of it); a search's stepper takes it when it is made
(`native_for`: without gradients, in eval mode, still valid), and `decode_step(model, tokens,
state)` runs one step with it, `model.decode_step` otherwise. It holds the model's weights by
reference: attach after the weights are final (`Translator.load` does). A model with an attention
window (`aiayn.model.window`) is declined: its decoder keeps a ring buffer of the window's keys and
values, which the native step does not read. A layer or Parameter put in place of one of the
model's, or a weight moved or cast, sends decoding back to Python; a copy or a pickle of the model
decodes in Python until attached again. Any failure after the library is loaded (building the
decoder, its first one-row step, a later step) leaves decoding in Python, with the reason.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable
from typing import TypeVar

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
    "NativeSearch",
    "attach_native_decoder",
    "decode_positions",
    "decode_step",
    "fallback",
    "native_decoder",
    "native_for",
    "native_rules",
    "native_status",
    "native_target",
    "propose_tokens",
    "restricted_native",
]
FALLBACK = "decoding steps run in Python"
T = TypeVar("T")

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


def fallback(
    python: Callable[..., T], lose: Callable[..., object]
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """The one place a native failure turns decoding to Python, as a decorator of every native call:
    where the call raises a RuntimeError, `python(*args)` answers instead (it raises too where the
    input is at fault: the error is then the caller's, and nothing is given up), then `lose(*args)`
    gives the native decoder up (later steps run in Python) and a RuntimeWarning says why."""

    def decorate(native: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(native)
        def call(*args):
            try:
                return native(*args)
            except RuntimeError as e:
                found = python(*args)
                lose(*args)
                warnings.warn(f"the native step failed ({_first_line(e)}): {FALLBACK}", RuntimeWarning, 2)
                return found

        return call

    return decorate


class NativeDecoder:
    """A Transformer's decoder as one native object holding (by reference) the model's weights;
    `watch=False` for one that lives only as long as a batch (a shortlist's, `restricted_native`),
    which leaves the model's own decoder the one its modules report to."""

    def __init__(self, decoder: torch.ScriptObject, model: Transformer, watch: bool = True) -> None:
        self._decoder = decoder
        self.stale = False  # a watched module got a new layer or Parameter, or a native call failed
        # Every float tensor it reads, with where its data was: `.to`, `.half` or `param.data = ...`
        # move it, and then the model decodes in Python again.
        held = [*model.decoder.parameters(), model.output_weight, model.output_bias]
        self._held = [(p, p.data_ptr()) for p in held if p is not None]
        self._layers = len(model.decoder.layers)
        self._model = weakref.ref(model)
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

    def lose(self, *_) -> None:
        """Give it up after a native call failed: stale (its searches go on in Python) and, where it is
        its model's own, detached (the model decodes in Python until attached again)."""
        self.stale = True
        model = self._model()
        if model is not None and _attached.get(model) is self:
            del _attached[model]

    @staticmethod
    def caches(state: DecoderState, rows: int) -> torch.ScriptObject:
        """The native `Caches` of `state` for calls on `rows` rows: its caches' and the encoder's keys and
        values, the source mask, and the kernels for `rows` (aiayn.runtime.linear's decision). Kept
        with the state (`DecoderState.native`) and made again only where its tensors are new (a
        search's `select` drops rows) or the rows differ: the steps of a search pass one object."""
        kv, kept = state.self_kv, state.native
        first = kv[0].k if kv else None
        if kept is not None and kept[0] is state.cross_kv and kept[1] is first and kept[2] == rows:
            return kept[3]
        cross = state.cross_kv
        caches = torch.classes.aiayn.Caches(
            [c.k for c in kv], [c.v for c in kv], [k for k, _ in cross], [v for _, v in cross],
            state.memory_mask, row_class(rows), padded_rows(rows),
        )  # fmt: skip
        state.native = (state.cross_kv, first, rows, caches)
        return caches

    def step(self, x: Tensor, state: DecoderState) -> Tensor:
        """x (rows, d_model), the embedded tokens at `state.step` -> logits (rows, vocab); appends
        this step's keys and values to `state.self_kv`."""
        caches, length = state.self_kv, _length(state)
        logits = self._decoder.step(x, self.caches(state, x.size(0)), length)
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
        return self._decoder.extend(x, lengths, self.caches(state, rows), padded_rows(rows * m))

    def propose(
        self, target: torch.ScriptObject, x: Tensor, lengths: Tensor, newest: Tensor, k: int, banned: Tensor,
        state: DecoderState,
    ) -> Tensor:  # fmt: skip
        """A draft's greedy proposals: `extend` over x (rows, q, d_model), then k - 1 single
        positions, each the token just chosen (row r's first choice follows its token newest[r]
        (rows,) of x; `banned` (ids,) never chosen; `target` as `native_target` gives it) -> (rows, k) int64
        columns. Each row's caches then hold lengths + newest + k positions, the last proposal not
        yet read."""
        rows, m = x.shape[:2]
        caches = self.caches(state, rows)
        return self._decoder.propose(target, x, lengths, newest, k, banned, caches, padded_rows(rows * m))

    def search(
        self,
        model: Transformer,
        state: DecoderState,
        rules: torch.ScriptObject,
        ids: Tensor | None,
        capacity: int,
    ) -> NativeSearch:
        """The native runs of one search of `state` (its caches `capacity` positions) under `rules`
        (`native_rules`), `ids` as in `native_target`."""
        search = torch.classes.aiayn.Search(self._decoder, rules, native_target(model, capacity, ids))
        return NativeSearch(self, state, search)


class NativeSearch:
    """Greedy and beam search's steps in runs, each run one native call (`Search.greedy`, `.beam`): the
    search's rules and target side crossed into C++ once, when the search started. A run that fails
    says why (a RuntimeWarning), gives the decoder up and answers None: the search takes its steps in
    Python from then on."""

    def __init__(self, native: NativeDecoder, state: DecoderState, search: torch.ScriptObject) -> None:
        self.native, self.state, self._search = native, state, search

    def _room(self, steps: int) -> tuple[int, int]:
        """The caches' length and `steps` capped at their room (a step past it fails in Python, as a
        single step would)."""
        caches, length = self.state.self_kv, _length(self.state)
        return length, max(1, min(steps, caches[0].k.size(2) - length)) if caches else steps

    @fallback(python=lambda *_: None, lose=lambda self, *_: self.native.lose())
    def greedy(
        self, tokens: Tensor, sums: Tensor, first_step: int, steps: int, caps: Tensor
    ) -> tuple[Tensor, Tensor] | None:
        """Up to `steps` steps of greedy search in one call: tokens (rows,) at `state.step`, the log P
        so far sums (rows,) float32, the search's step number `first_step`, caps (rows,) the step
        after which a row may only end -> (chosen (rows, s), running sums (rows, s)), s <= steps,
        ending at the first step some row chose EOS; the state advanced s. None where it failed."""
        if self.native.stale:
            return None
        length, steps = self._room(steps)
        caches = self.native.caches(self.state, tokens.size(0))
        chosen, running = self._search.greedy(tokens, sums, caps, first_step, steps, caches, length)
        _advance(self.state, chosen.size(1))
        return chosen, running

    @fallback(python=lambda *_: None, lose=lambda self, *_: self.native.lose())
    def beam(
        self, beams, tokens: Tensor, first_step: int, steps: int, n_best: int
    ) -> tuple[int, Tensor, Tensor, Tensor] | None:
        """Up to `steps` steps of beam search in one call: `beams` the search's state (aiayn.decode.beam.
        Beams: max_lens and six tensors, by name, crossing as one `BeamState` and updated), tokens
        (n * k,) at `state.step`, the search's step number `first_step`, n_best -> the steps taken,
        rows (n * k,) each survivor's row, last (n * k,) its token, done (n,), ending at the first
        step some sentence is done (its rows not reordered); the state advanced that many steps.
        None where it failed."""
        if self.native.stale:
            return None
        length, steps = self._room(steps)
        state = torch.classes.aiayn.BeamState(
            beams.max_lens, beams.live_seqs, beams.live_scores, beams.fin_seqs, beams.fin_scores,
            beams.fin_log_probs, beams.fin_lens,
        )  # fmt: skip
        caches = self.native.caches(self.state, tokens.size(0))
        rows, last, done, taken = self._search.beam(state, tokens, first_step, steps, n_best, caches, length)
        beams.live_seqs, beams.live_scores, beams.fin_seqs = (
            state.live_seqs,
            state.live_scores,
            state.fin_seqs,
        )
        beams.fin_scores, beams.fin_log_probs, beams.fin_lens = (
            state.fin_scores,
            state.fin_log_probs,
            state.fin_lens,
        )
        taken = int(taken)
        _advance(self.state, taken)
        return taken, rows, last, done


def native_rules(eos: int, banned: Tensor, style: str, alpha: float) -> torch.ScriptObject:
    """A search's rules as C++ reads them (aiayn.decode.rules.SearchRules: native_rules.h), made once
    per search: the EOS column, the banned columns (b,) int64, the length penalty's style and alpha."""
    return torch.classes.aiayn.SearchRules(eos, banned, style, alpha)


def native_target(model: Transformer, capacity: int, ids: Tensor | None = None) -> torch.ScriptObject:
    """The native `Target` of a search on `model` whose caches hold `capacity` positions: the target
    embeddings, their scale and the positions' table (3.4, 3.5), and `ids` (columns,) the target id
    of each output column where the output layer is a shortlist's. Made once per search."""
    embed, c = model.tgt_embed, model.config
    positions = model.tgt_pos(min(capacity, c.max_positions) if c.positions == "learned" else capacity)
    return torch.classes.aiayn.Target(embed.weight.detach(), embed.scale, positions, ids)


def _length(state: DecoderState) -> int:
    """The positions the state's caches hold (its step, without layers)."""
    return state.self_kv[0].length if state.self_kv else state.step


def _advance(state: DecoderState, steps: int) -> None:
    """The state and its caches hold `steps` more positions."""
    for cache in state.self_kv:
        cache.length += steps
    state.step += steps


def native_decoder(model: nn.Module) -> NativeDecoder | None:
    """The native decoder attached to `model`, while it still computes the model's own layers."""
    native = _attached.get(model)
    return native if native is not None and native.valid_for(model) else None


def native_for(model: Transformer, state: DecoderState) -> NativeDecoder | None:
    """The native decoder a step of `model` on `state` takes: attached and valid, without gradients, in
    eval mode; None where the step runs in Python."""
    native = _attached.get(model)
    if native is None or model.training or torch.is_grad_enabled() or not native.valid_during(model, state):
        return None
    return native


def _python_step(model: Transformer, tokens: Tensor, state: DecoderState) -> Tensor:
    return model.decode_step(tokens, state)


def _lose_attached(model: Transformer, *_) -> None:
    native = _attached.get(model)
    if native is not None:
        native.lose()


@fallback(python=_python_step, lose=_lose_attached)
def _native_step(model: Transformer, tokens: Tensor, state: DecoderState) -> Tensor:
    logits = _attached[model].step(model.embed_step(tokens, state), state)  # checks all before writing
    state.step += 1
    return logits


def decode_step(model: Transformer, tokens: Tensor, state: DecoderState) -> Tensor:
    """`model.decode_step(tokens, state)`: tokens (rows,) -> logits (rows, vocab), the state advanced;
    the decoder's layers and the output layer as one native call where a native decoder is attached
    and still valid, without gradients, in eval mode. A native step that fails where the Python step
    does not runs in Python, and so do the model's later steps (a RuntimeWarning says why)."""
    if native_for(model, state) is None:
        return model.decode_step(tokens, state)
    return _native_step(model, tokens, state)


def _python_positions(model, tokens, lengths, state, python: Callable[[], Tensor]) -> Tensor:
    return python()


@fallback(python=_python_positions, lose=_lose_attached)
def _native_positions(model, tokens, lengths, state, python) -> Tensor:
    positions = lengths[:, None].to(tokens.device) + torch.arange(tokens.size(1), device=tokens.device)
    return _attached[model].extend(model.embed_tokens(tokens, positions), lengths, state)  # checks first


def decode_positions(
    model: Transformer, tokens: Tensor, lengths: Tensor, state: DecoderState, python: Callable[[], Tensor]
) -> Tensor:
    """tokens (rows, m) of row r at positions lengths[r] .. lengths[r] + m - 1 (lengths (rows,) on
    the CPU) -> logits (rows, m, vocab), the m positions' keys and values written into the caches:
    one native call (`NativeDecoder.extend`) where a native decoder is attached and valid, without
    gradients, in eval mode, and `python()` otherwise (aiayn.decode.ragged). A native call that
    fails where Python does not leaves the model decoding in Python (a RuntimeWarning says why)."""
    if native_for(model, state) is None:
        return python()
    return _native_positions(model, tokens, lengths, state, python)


def _no_proposals(*_) -> None:
    return None


@fallback(python=_no_proposals, lose=_lose_attached)
def _native_proposals(model, tokens, lengths, newest, k, banned, state, target) -> Tensor:
    positions = lengths[:, None] + torch.arange(tokens.size(1))  # (rows, q)
    x = model.embed_tokens(tokens, positions)
    return _attached[model].propose(target, x, lengths, newest, k, banned, state)


def propose_tokens(
    model: Transformer, tokens: Tensor, lengths: Tensor, newest: Tensor, k: int, banned: Tensor,
    state: DecoderState, target: torch.ScriptObject,
) -> Tensor | None:  # fmt: skip
    """A draft's k greedy proposals per row in one native call (`NativeDecoder.propose`): tokens
    (rows, q) of row r at lengths[r] .. (lengths (rows,) on the CPU), its newest at newest[r] ->
    (rows, k); None where the model decodes in Python (the caller then proposes step by step).
    `target`: `NativeDecoder.target` of the model's (whole) output layer. A native call that fails
    says why (a RuntimeWarning) and leaves the model decoding in Python."""
    if native_for(model, state) is None:
        return None
    return _native_proposals(model, tokens, lengths, newest, k, banned, state, target)


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
