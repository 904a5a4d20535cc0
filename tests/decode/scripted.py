"""A scripted model for search tests: next-token log-probs fixed by each row's prefix alone, and
exhaustive search over it (no Transformer involved)."""

from __future__ import annotations

import functools
import hashlib
import itertools

import torch
from torch import Tensor

from aiayn.decode.rules import length_penalty

PAD, BOS, EOS = 0, 2, 3
BANNED = (PAD, BOS)


@functools.cache
def prefix_log_probs(prefix: tuple[int, ...], vocab: int, sharpness: float = 2.0) -> Tensor:
    """A fixed, prefix-dependent next-token distribution (vocab,) in float64."""
    seed = int(hashlib.sha256(repr(prefix).encode()).hexdigest()[:8], 16)
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(sharpness * torch.randn(vocab, generator=g, dtype=torch.float64), dim=0)


class ScriptedStepper:
    """A Stepper whose log-probs depend only on each row's prefix: batching cannot change results."""

    def __init__(self, rows: int, vocab: int, sharpness: float = 2.0, eos_bias: float = 0.0):
        self.prefixes: list[tuple[int, ...]] = [() for _ in range(rows)]
        self.vocab, self.sharpness, self.eos_bias = vocab, sharpness, eos_bias
        self.started = False

    def log_probs(self, prefix: tuple[int, ...]) -> Tensor:
        logp = prefix_log_probs(prefix, self.vocab, self.sharpness).clone()
        logp[EOS] += self.eos_bias
        return torch.log_softmax(logp, dim=0)  # a distribution again

    def step(self, tokens: Tensor) -> Tensor:
        assert tokens.numel() == len(self.prefixes)
        if self.started:  # the first token is the start token: not part of the prefix
            self.prefixes = [p + (int(t),) for p, t in zip(self.prefixes, tokens, strict=True)]
        self.started = True
        return torch.stack([self.log_probs(p) for p in self.prefixes]).float()

    def reorder(self, index: Tensor) -> None:
        assert index.numel() == len(self.prefixes)
        self.select(index)

    def select(self, index: Tensor) -> None:
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


def exhaustive(
    stepper: ScriptedStepper, max_len: int, alpha: float, style: str
) -> list[tuple[float, list[int]]]:
    """Every output of at most max_len tokens + EOS (EOS forced after max_len), best first."""
    allowed = [t for t in range(stepper.vocab) if t not in BANNED and t != EOS]
    finished = []
    for n in range(max_len + 1):
        for seq in itertools.product(allowed, repeat=n):
            logp = sum(float(stepper.log_probs(seq[:i])[seq[i]]) for i in range(n))
            logp += float(stepper.log_probs(seq)[EOS])
            finished.append((logp / length_penalty(n + 1, alpha, style), list(seq)))
    return sorted(finished, key=lambda x: -x[0])
