"""Binding the Transformer to the search (section 6.1): encode once, then decode one step at a time.

`TransformerStepper` is the `Stepper` (aiayn.decode.rules) for a batch of padded sources: the
encoder runs once, the decoder's cross-attention keys/values are projected once per sentence and
repeated for its hypotheses (`Transformer.start_decoding`), and every step feeds only the newest
token through the decoder's self-attention cache. Whether its steps run natively (one C++ call a
step: aiayn.runtime.native_step) or in Python is decided once, when it is made: native where the
model has a valid native decoder attached and decodes without gradients in eval mode. A shortlist
(aiayn.decode.shortlist.KeptOutput) restricts its output layer, native or Python; an int8 model is
native or Python as its float32 one is.

`backend_of` is the one place a search's steps are given where to run, when the search starts: a
native `TransformerStepper` gives greedy and beam search runs of native steps (`Backend.runs`,
`NativeSearch`), with the search's rules crossed into C++ once; every other stepper, and a search
that forces tokens (prefixes), steps in Python. A native call that fails turns the search to Python
at one guarded place (`aiayn.runtime.native_step.fallback`), with a RuntimeWarning.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.decode.rules import SearchRules, Stepper
from aiayn.decode.shortlist import KeptOutput
from aiayn.model.transformer import Transformer
from aiayn.runtime.native_step import NativeSearch, fallback, native_for
from aiayn.runtime.scores import log_normalizers


class TransformerStepper:
    """A `Stepper` over `Transformer.decode_step` for n sentences x `beam` hypotheses (sentence-major),
    its steps native or Python as decided when it is made."""

    def __init__(
        self, model: Transformer, src: Tensor, beam: int, max_steps: int, kept: Tensor | None = None
    ):
        """src (n, src_len) right-padded; max_steps: the most decoding steps (cache capacity);
        kept: the target ids a shortlist keeps (its tokens and outputs are then their columns)."""
        memory, mask = model.encode(src)  # (n, src_len, d_model), (n, 1, 1, src_len) | None
        self.model, self.capacity = model, max_steps
        self.state = model.start_decoding(memory, mask, max_steps, beam)  # n * beam rows
        self.native = native_for(model, self.state)  # the model's own native decoder, or None: Python
        self.output = None if kept is None else KeptOutput(model, kept, self.native is not None)

    def _logits(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> logits (rows, vocab or kept) in float32."""
        if self.output is not None:
            return self.output.step(tokens, self.state).float()  # (rows, kept)
        if self.native is None or self.native.stale:  # stale: a layer replaced, or a native call failed
            return self.python_logits(tokens).float()  # (rows, vocab)
        return self._native_logits(tokens).float()

    def python_logits(self, tokens: Tensor) -> Tensor:
        """The step in Python (`Transformer.decode_step`)."""
        return self.model.decode_step(tokens, self.state)

    @fallback(python=lambda self, tokens: self.python_logits(tokens), lose=lambda self, _: self.lose())
    def _native_logits(self, tokens: Tensor) -> Tensor:
        """The step as one native call: checks all it is given before writing."""
        logits = self.native.step(self.model.embed_step(tokens, self.state), self.state)  # (rows, vocab)
        self.state.step += 1
        return logits

    def lose(self) -> None:
        """Its native decoder failed: given up (aiayn.runtime.native_step.NativeDecoder.lose)."""
        self.native.lose()

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> log-probabilities (rows, vocab or kept) in float32, written over the
        logits (this step's own tensor): a fresh one costs its pages again every step on the CPU."""
        logits = self._logits(tokens)
        return torch.log_softmax(logits, dim=-1, out=None if logits.requires_grad else logits)

    def logits_and_normalizers(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """tokens (rows,) -> the logits (rows, vocab or kept) and their log-normalisers (rows,):
        log-probabilities = logits - normalisers, never written out (beam search's step)."""
        logits = self._logits(tokens)
        return logits, log_normalizers(logits)

    def runs(self, rules: SearchRules) -> NativeSearch | None:
        """Greedy and beam search's steps in native runs under `rules` (crossed into C++ once, here),
        on the output layer its steps take (a shortlist's, where it has one); None where its steps
        run in Python."""
        native, ids = (self.native, None) if self.output is None else (self.output.native, self.output.kept)
        if native is None or native.stale:
            return None
        return native.search(self.model, self.state, rules.native, ids, self.capacity)

    def reorder(self, index: Tensor) -> None:
        self.state.reorder(index)

    def select(self, index: Tensor) -> None:
        self.state.select(index)


@dataclass(frozen=True)
class Backend:
    """Where a search's steps run, chosen once when it starts (`backend_of`): `scores(tokens)` a step's
    scores for the beam loop (logits and their log-normalisers, or log-probabilities and None), and
    `runs` greedy and beam search's steps in native runs (None: every step in Python)."""

    scores: Callable[[Tensor], tuple[Tensor, Tensor | None]]
    runs: NativeSearch | None = None


def backend_of(stepper: Stepper, rules: SearchRules, runs: bool) -> Backend:
    """The one place a search's steps are given where to run: for a `TransformerStepper`, its logits
    and normalisers, and (where `runs`: greedy search's most probable token or the plain beams, and
    the rules force no prefix) its native runs where its steps are native; for any other stepper (an
    ensemble, a mask, ONNX) its log-probabilities, every step in Python."""
    if not isinstance(stepper, TransformerStepper):
        return Backend(lambda tokens: (stepper.step(tokens), None))
    plain = runs and rules.prefixes is None
    return Backend(stepper.logits_and_normalizers, stepper.runs(rules) if plain else None)


MOVED = (
    "decode_batch",
    "Controls",
    "StepMask",
    "max_lengths",
    "source_limit",
    "target_limit",
    "SOURCE_LIMIT",
)


def __getattr__(name: str):
    """What moved to aiayn.decode.generate (the entry of generation), with a DeprecationWarning."""
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    generate = importlib.import_module("aiayn.decode.generate")  # it imports this module

    warnings.warn(
        f"{__name__}.{name} is deprecated: it is aiayn.decode.generate.{name} now", DeprecationWarning, 2
    )
    return vars(generate)[name]
