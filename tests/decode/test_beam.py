"""Beam search (aiayn.decode.beam, section 6.1) on a scripted model: the exhaustive optimum,
exact early termination, survivors kept in their rows."""

from __future__ import annotations

import functools

import pytest
import torch
from scripted import BANNED, BOS, EOS, ScriptedStepper, exhaustive
from torch import Tensor

from aiayn.decode.beam import _settled
from aiayn.decode.rules import SearchRules, length_penalty
from aiayn.decode.strategies import beam_search


@pytest.mark.parametrize("style", ["gnmt", "len", "fairseq"])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_wide_beam_finds_the_exhaustive_optimum(style, alpha):
    vocab, max_len = 7, 4  # 4 real tokens + EOS: 4^4 = 256 live prefixes at most
    k = 400
    for eos_bias in (-3.0, 0.0, 2.0):
        stepper = ScriptedStepper(k, vocab, eos_bias=eos_bias)
        hyps = beam_search(
            stepper,
            torch.tensor([max_len]),
            SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, alpha=alpha, style=style),
            beam_size=k,
            n_best=5,
        )[0]
        best = exhaustive(ScriptedStepper(1, vocab, eos_bias=eos_bias), max_len, alpha, style)[:5]
        assert [h.tokens for h in hyps] == [seq for _, seq in best]
        for h, (score, seq) in zip(hyps, best, strict=True):
            assert h.score == pytest.approx(score, abs=1e-4)
            assert h.log_prob == pytest.approx(score * length_penalty(len(seq) + 1, alpha, style), abs=1e-4)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_early_termination_is_exact(alpha):
    """The search stops before the maximum length once no live hypothesis can beat the n-best;
    with a strong length penalty that needs the bound at the longest possible length."""
    vocab, max_len, k = 6, 6, 800  # 3 real tokens: 3^6 = 729 live prefixes at most
    for eos_bias in (0.0, 1.5):
        stepper = ScriptedStepper(k, vocab, eos_bias=eos_bias)
        rules = SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, alpha=alpha)
        hyps = beam_search(stepper, torch.tensor([max_len]), rules, beam_size=k, n_best=3)[0]
        best = exhaustive(ScriptedStepper(1, vocab, eos_bias=eos_bias), max_len, alpha, "gnmt")[:3]
        assert [h.tokens for h in hyps] == [seq for _, seq in best]
    assert len(max(stepper.prefixes, key=len)) < max_len  # it stopped early


class LongWinsStepper(ScriptedStepper):
    """EOS first is likely (P 0.4); token 4 (P 0.22) leads to a near-certain run of 4s: a 6-token
    output with a lower log P that the length penalty (alpha 2) ranks first."""

    def log_probs(self, prefix: tuple[int, ...]) -> Tensor:
        return _long_wins_log_probs(prefix, self.vocab)


@functools.cache
def _long_wins_log_probs(prefix: tuple[int, ...], vocab: int) -> Tensor:
    probs = torch.full((vocab,), 0.01, dtype=torch.float64)
    probs[BANNED,] = 0.0
    if not prefix:
        probs[EOS], probs[4] = 0.4, 0.22
    elif set(prefix) == {4}:
        probs[4] = 0.99 if len(prefix) < 6 else 0.0
        probs[EOS] = 0.5 if len(prefix) == 6 else 0.001
    else:
        probs[EOS] = 0.001  # other outputs are unlikely to end early (the pool stays open)
    return torch.log(probs / probs.sum())


@pytest.mark.parametrize("k", [2, 4])
def test_early_termination_bounds_at_the_longest_length(k):
    """After step 1 the finished [] beats every live prefix at its current length, but not at the
    maximum length: the search must go on and find [4] * 6."""
    stepper = LongWinsStepper(k, 8)
    hyp = beam_search(
        stepper,
        torch.tensor([6]),
        SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, alpha=2.0),
        beam_size=k,
    )[0][0]
    assert hyp.tokens == [4] * 6
    assert hyp.score == pytest.approx(exhaustive(LongWinsStepper(1, 8), 6, 2.0, "gnmt")[0][0], abs=1e-5)


def test_surviving_beams_keep_their_rows():
    """Every parent with a surviving child keeps its best child in its own row; only the rows of
    beams that died are refilled, so the cache moves k - (distinct parents) rows per sentence."""
    parents = torch.tensor([[2, 2, 0, 3], [1, 1, 1, 1], [0, 1, 2, 3], [3, 2, 1, 0]])  # best first
    order = _settled(parents)
    for parent, slots in zip(parents.tolist(), order.tolist(), strict=True):
        assert sorted(slots) == [0, 1, 2, 3]  # a permutation of the survivors
        for row, survivor in enumerate(slots):
            if row in parent:
                assert survivor == parent.index(row)  # the best child of beam `row` stays there
        moved = sum(parent[survivor] != row for row, survivor in enumerate(slots))
        assert moved == 4 - len(set(parent))
    assert order[0].tolist() == [2, 1, 0, 3]  # beam 1 died: 2's second child takes its row
