"""The well-formedness mask: on a scripted model, every output of greedy and beam search is one tree
with one terminal per word within the length limit, and a wide beam finds the best such tree."""

from __future__ import annotations

import functools
import hashlib
import itertools
import math

import pytest
import torch
from torch import Tensor

from aiayn.decode.rules import SearchRules, length_penalty
from aiayn.decode.strategies import beam_search, greedy_search
from aiayn.errors import AiaynError
from aiayn.parse.constraint import TreeConstraint, TreeMask, TreeVocab
from aiayn.parse.trees import delinearise

PAD, BOS, EOS = 0, 2, 3
LABELS = ("NP", "S", "VP")
PIECES = ["<pad>", "<unk>", "<s>", "</s>", "(NP", ")NP", "(S", ")S", "(VP", ")VP", "XX", "▁dog", "▁the", "s"]
VOCAB = TreeVocab.build(LABELS, {p: i for i, p in enumerate(PIECES)}.get, EOS, len(PIECES))


@functools.cache
def prefix_log_probs(prefix: tuple[int, ...]) -> Tensor:
    """A fixed, prefix-dependent next-token distribution (vocab,): any batching gives the same."""
    seed = int(hashlib.sha256(repr(prefix).encode()).hexdigest()[:8], 16)
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(2.0 * torch.randn(len(PIECES), generator=g, dtype=torch.float64), dim=0)


class ScriptedStepper:
    """Log-probs that depend only on each row's prefix; rows follow reorder/select."""

    def __init__(self, rows: int):
        self.prefixes: list[tuple[int, ...]] = [() for _ in range(rows)]
        self.started = False

    def step(self, tokens: Tensor) -> Tensor:
        if self.started:
            self.prefixes = [p + (int(t),) for p, t in zip(self.prefixes, tokens, strict=True)]
        self.started = True
        return torch.stack([prefix_log_probs(p) for p in self.prefixes]).float()

    def reorder(self, index: Tensor) -> None:
        self.select(index)

    def select(self, index: Tensor) -> None:
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


def search(n_words: list[int], max_lens: list[int], beam: int, n_best: int = 1, alpha: float = 0.3):
    lens = torch.tensor(max_lens)
    stepper = TreeMask(VOCAB, torch.tensor(n_words)).wrap(
        ScriptedStepper(len(n_words) * beam), lens, beam, "cpu"
    )
    common = dict(start_id=BOS, eos_id=EOS, banned=(PAD, BOS), alpha=alpha)
    if beam == 1:
        return greedy_search(stepper, lens, SearchRules(**common))
    return beam_search(stepper, lens, SearchRules(**common), beam_size=beam, n_best=n_best)


def as_tree(tokens: list[int], n: int):
    return delinearise([PIECES[t] for t in tokens], [f"w{i}" for i in range(n)])


@pytest.mark.parametrize("beam", [1, 2, 5])
def test_every_output_is_one_tree_with_one_terminal_per_word(beam):
    n_words = [1, 2, 3, 5, 8, 4, 1, 6]
    max_lens = [3, 4, 9, 7, 40, 12, 30, 8]  # several at the minimum, n + 2
    results = search(n_words, max_lens, beam, n_best=min(beam, 3))
    for n, limit, hyps in zip(n_words, max_lens, results, strict=True):
        assert hyps and all(math.isfinite(h.score) for h in hyps)
        for hyp in hyps:
            assert len(hyp.tokens) <= limit
            assert len(as_tree(hyp.tokens, n).words()) == n  # raises if malformed


def well_formed(n: int, max_len: int):
    """Every well-formed token sequence of at most max_len tokens over the tree tokens."""
    alphabet = [4, 5, 6, 7, 8, 9, 10]
    for length in range(n + 2, max_len + 1):
        for seq in itertools.product(alphabet, repeat=length):
            try:
                as_tree(list(seq), n)
            except ValueError:
                continue
            yield list(seq)


def score(seq: list[int], alpha: float) -> float:
    full = seq + [EOS]
    log_p = sum(float(prefix_log_probs(tuple(full[:i]))[t]) for i, t in enumerate(full))
    return log_p / length_penalty(float(len(full)), alpha)


@pytest.mark.parametrize("n, max_len", [(1, 5), (2, 6), (3, 6)])
def test_a_wide_beam_finds_the_best_well_formed_tree(n, max_len):
    best = max(well_formed(n, max_len), key=lambda seq: score(seq, 0.3))
    (hyp,) = search([n], [max_len], beam=400)[0]
    assert hyp.tokens == best
    assert hyp.score == pytest.approx(score(best, 0.3), abs=1e-4)


class Uniform:
    def step(self, tokens: Tensor) -> Tensor:
        return torch.zeros(tokens.numel(), len(PIECES))

    def reorder(self, index: Tensor) -> None: ...

    def select(self, index: Tensor) -> None: ...


def allowed_after(prefix: str, n: int, max_len: int = 50) -> set[str]:
    """The tokens the mask allows next after `prefix` for a sentence of n words."""
    constraint = TreeConstraint(Uniform(), VOCAB, torch.tensor([n]), torch.tensor([max_len]), "cpu")
    logp = constraint.step(torch.tensor([BOS]))
    for piece in prefix.split():
        logp = constraint.step(torch.tensor([PIECES.index(piece)]))
    return {PIECES[i] for i in logp[0].isfinite().nonzero()[:, 0].tolist()}


def test_the_rules_of_the_mask():
    opens = {"(NP", "(S", "(VP"}
    assert allowed_after("", 2) == opens  # the tree starts with a constituent
    assert allowed_after("(S", 2) == opens | {"XX"}  # no empty constituent: no close yet
    assert allowed_after("(S (NP XX", 2) == opens | {"XX", ")NP"}  # only the innermost label closes
    assert allowed_after("(S (NP XX XX", 2) == {")NP"}  # words used up: close, no new constituent
    assert allowed_after("(S XX XX", 2) == {")S"}  # the root closes only after the last word
    assert allowed_after("(S XX XX )S", 2) == {"</s>"}
    assert allowed_after("(S XX", 2, max_len=4) == {"XX"}  # no room left for another constituent
    assert allowed_after("(S (VP (NP XX )NP", 3) == opens | {"XX", ")VP"}


def test_a_length_limit_below_the_smallest_tree_is_an_error():
    with pytest.raises(
        AiaynError, match="a sentence of 3 words needs at least 5 output tokens but may have 4"
    ):
        search([1, 3], [3, 4], beam=2)
