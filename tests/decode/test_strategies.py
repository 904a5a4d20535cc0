"""Greedy and beam search against exhaustive search on a scripted model (no Transformer involved)."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from scripted import BANNED, BOS, EOS, ScriptedStepper, exhaustive
from torch import Tensor

from aiayn.decode.beam import _settled
from aiayn.decode.rules import SearchRules, SearchStopped, length_penalty
from aiayn.decode.strategies import beam_search, greedy_search


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


def run_beam(sentences: int, max_lens: list[int], k: int, n_best: int = 1, **rules):
    stepper = ScriptedStepper(sentences * k, 12)
    found = SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, **rules)
    return beam_search(stepper, torch.tensor(max_lens), found, beam_size=k, n_best=n_best)


def test_beam_one_equals_greedy():
    for seed in range(4):
        max_lens = [3 + seed, 8, 1, 12]
        stepper = ScriptedStepper(4, 12, sharpness=1.0 + seed)
        greedy = greedy_search(
            stepper, torch.tensor(max_lens), SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED)
        )
        stepper = ScriptedStepper(4, 12, sharpness=1.0 + seed)
        beam = beam_search(
            stepper, torch.tensor(max_lens), SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED), beam_size=1
        )
        for g, b in zip(greedy, beam, strict=True):
            assert g[0].tokens == b[0].tokens
            assert g[0].score == pytest.approx(b[0].score, abs=1e-6)


def test_greedy_takes_the_argmax_and_scores_it():
    stepper = ScriptedStepper(1, 12, sharpness=3.0)
    hyp = greedy_search(
        stepper, torch.tensor([20]), SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, alpha=0.6)
    )[0][0]
    prefix, logp = (), 0.0
    while True:
        lp = stepper.log_probs(prefix).clone()
        lp[list(BANNED)] = -math.inf
        token = int(lp.argmax())
        logp += float(lp[token])
        if token == EOS or len(prefix) == 20:
            break
        prefix += (token,)
    assert hyp.tokens == list(prefix)
    assert hyp.score == pytest.approx(logp / length_penalty(len(prefix) + 1, 0.6), abs=1e-5)


def test_nbest_sorted_and_distinct():
    results = run_beam(3, [10, 10, 10], 6, n_best=6, alpha=0.6)
    for hyps in results:
        assert len(hyps) == 6
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 6


def test_batch_equals_one_sentence_at_a_time_and_keeps_order():
    """The scripted log-probs depend only on the prefix, so rows of all sentences are identical models;
    varying max lengths make sentences finish at different steps and leave the batch."""
    max_lens = [9, 2, 5, 0, 7]
    batched = run_beam(len(max_lens), max_lens, 4, n_best=2)
    for i, m in enumerate(max_lens):
        alone = run_beam(1, [m], 4, n_best=2)[0]
        assert [(h.tokens, round(h.score, 5)) for h in batched[i]] == [
            (h.tokens, round(h.score, 5)) for h in alone
        ]


@pytest.mark.parametrize("k", [1, 3])
def test_max_length_forces_eos(k):
    """A model that almost never says EOS: each output has exactly max_len tokens."""
    max_lens = [0, 1, 4, 6]
    stepper = ScriptedStepper(len(max_lens) * k, 9, eos_bias=-30.0)
    search = greedy_search if k == 1 else beam_search
    kw = {} if k == 1 else {"beam_size": k}
    results = search(
        stepper, torch.tensor(max_lens), SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED), **kw
    )
    assert [len(r[0].tokens) for r in results] == max_lens
    assert all(h.score < -20 for r in results for h in r)  # the forced EOS' log-prob counts


class CountingStepper(ScriptedStepper):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = 0

    def step(self, tokens: Tensor) -> Tensor:
        self.steps += 1
        return super().step(tokens)


@pytest.mark.parametrize("k", [1, 3])
def test_should_stop_is_asked_before_every_step_and_stops_the_search(k):
    search = functools.partial(
        greedy_search if k == 1 else beam_search, **({} if k == 1 else {"beam_size": k})
    )
    max_lens = torch.tensor([20, 20])  # no EOS: every search runs 21 steps
    stepper = CountingStepper(2 * k, 9, eos_bias=-30.0)
    asked = []

    def should_stop() -> bool:
        asked.append(stepper.steps)
        return len(asked) == 4

    with pytest.raises(SearchStopped):
        search(
            stepper, max_lens, SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, should_stop=should_stop)
        )
    assert asked == [0, 1, 2, 3] and stepper.steps == 3  # three steps ran, not a fourth
    never = CountingStepper(2 * k, 9, eos_bias=-30.0)
    results = search(
        never, max_lens, SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED, should_stop=lambda: False)
    )
    plain = search(
        CountingStepper(2 * k, 9, eos_bias=-30.0),
        max_lens,
        SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED),
    )
    assert never.steps == 21 and [r[0].tokens for r in results] == [r[0].tokens for r in plain]


def test_eos_first_gives_an_empty_output_and_banned_ids_never_appear():
    stepper = ScriptedStepper(2 * 4, 9, eos_bias=30.0)
    results = beam_search(
        stepper, torch.tensor([5, 5]), SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED), beam_size=4
    )
    assert [r[0].tokens for r in results] == [[], []]
    stepper = ScriptedStepper(3 * 4, 9, sharpness=0.1)  # near-uniform: banned ids would show up
    for r in beam_search(
        stepper,
        torch.tensor([8, 8, 8]),
        SearchRules(start_id=BOS, eos_id=EOS, banned=BANNED),
        beam_size=4,
        n_best=4,
    ):
        assert all(t not in BANNED + (EOS,) for h in r for t in h.tokens)


def test_no_sentences():
    stepper = ScriptedStepper(0, 9)
    assert (
        beam_search(
            stepper, torch.tensor([], dtype=torch.long), SearchRules(start_id=BOS, eos_id=EOS), beam_size=4
        )
        == []
    )
    assert (
        greedy_search(stepper, torch.tensor([], dtype=torch.long), SearchRules(start_id=BOS, eos_id=EOS))
        == []
    )


def test_length_penalty_values():
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(7, 0.6, "len") == pytest.approx(7**0.6)
    with pytest.raises(ValueError):
        length_penalty(3, 0.6, "other")


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
