"""Ensembles: several models that share a vocabulary decode as one.

Each model keeps its own encoder output and key/value caches (its own `TransformerStepper`); at
every step the ensemble's next-token distribution is the mean of the models' probabilities,
log(1/M * sum_m p_m), as fairseq's `EnsembleModel` computes it, so it is a distribution again
and sampling and the length penalty mean what they mean for one model. (Marian and OpenNMT-py's
`-models` sum or average log-probabilities instead: the same argmax for two near-identical
models, not in general.) An ensemble of a model with itself is that model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.decode.rules import Stepper
from aiayn.errors import AiaynError


class EnsembleStepper:
    """A `Stepper` over several steppers with the same rows: mean probability of the next token."""

    def __init__(self, steppers: Sequence[Stepper]):
        if not steppers:
            raise ValueError("an ensemble needs at least one model")
        self.steppers = list(steppers)

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> log of the models' mean next-token probability (rows, vocab)."""
        if len(self.steppers) == 1:
            return self.steppers[0].step(tokens)
        logps = torch.stack([s.step(tokens) for s in self.steppers])  # (models, rows, vocab)
        return torch.logsumexp(logps, dim=0) - math.log(len(self.steppers))

    def reorder(self, index: Tensor) -> None:
        for s in self.steppers:
            s.reorder(index)

    def select(self, index: Tensor) -> None:
        for s in self.steppers:
            s.select(index)


def check_shared_vocabulary(names: Sequence[str], vocabularies: Sequence[list[str]], specials) -> None:
    """One line naming the first model whose vocabulary (pieces in id order) or special ids
    (pad, bos, eos, start) differ from the first model's."""
    for name, vocab, special in zip(names[1:], vocabularies[1:], specials[1:], strict=True):
        if special != specials[0]:
            raise AiaynError(f"{name}: special token ids {special} differ from {names[0]}'s {specials[0]}")
        if vocab != vocabularies[0]:
            diff = next(
                (i for i, (a, b) in enumerate(zip(vocab, vocabularies[0], strict=False)) if a != b), None
            )
            where = (
                f"id {diff} is {vocab[diff]!r}, not {vocabularies[0][diff]!r}"
                if diff is not None
                else (f"{len(vocab)} entries, not {len(vocabularies[0])}")
            )
            raise AiaynError(
                f"{name}: its vocabulary differs from {names[0]}'s ({where}); an ensemble needs one"
            )
