"""The searches through aiayn.decode.strategies on a scripted model (no Transformer involved): beam 1
is greedy, n-best lists, batching, stopping, against exhaustive search."""

from __future__ import annotations

import functools

import pytest
import torch
from scripted import BANNED, BOS, EOS, ScriptedStepper
from torch import Tensor

from aiayn.decode.rules import SearchRules, SearchStopped, length_penalty
from aiayn.decode.strategies import beam_search, greedy_search


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
