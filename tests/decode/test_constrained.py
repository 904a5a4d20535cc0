"""Dynamic beam allocation against exhaustive search and plain beam search on a scripted model."""

from __future__ import annotations

import random

import pytest
import torch
from scripted import BANNED, BOS, EOS, ScriptedStepper, exhaustive

from aiayn.decode.constrained import Progress
from aiayn.decode.rules import SearchRules
from aiayn.decode.strategies import beam_search, constrained_beam_search

COMMON = dict(start_id=BOS, eos_id=EOS, banned=BANNED)


def contains(seq: list[int], phrase: list[int]) -> bool:
    return any(seq[i : i + len(phrase)] == phrase for i in range(len(seq) - len(phrase) + 1))


def test_without_constraints_it_is_beam_search():
    for seed in range(3):
        max_lens, k = [3 + seed, 8, 1, 12, 6], 4
        plain = beam_search(
            ScriptedStepper(5 * k, 12, sharpness=1.0 + seed),
            torch.tensor(max_lens),
            SearchRules(**COMMON),
            beam_size=k,
            n_best=2,
        )
        mixed = [[], [], [[5, 6]], [], [[7]]]  # sentences 3 and 5 share the batch with constraints
        dba = constrained_beam_search(
            ScriptedStepper(5 * k, 12, sharpness=1.0 + seed),
            torch.tensor(max_lens),
            SearchRules(**COMMON),
            mixed,
            beam_size=k,
            n_best=2,
        )
        for i in (0, 1, 3):
            assert [h.tokens for h in dba[i]] == [h.tokens for h in plain[i]]
            assert [h.score for h in dba[i]] == pytest.approx([h.score for h in plain[i]], abs=1e-6)
        assert contains(dba[2][0].tokens, [5, 6]) and contains(dba[4][0].tokens, [7])


@pytest.mark.parametrize("phrases", [[[5]], [[6, 5]], [[4], [6]], [[5, 5]]])
def test_a_wide_beam_finds_the_best_output_that_holds_every_phrase(phrases):
    vocab, max_len, k = 7, 4, 400
    best = exhaustive(ScriptedStepper(1, vocab), max_len, 0.6, "gnmt")
    wanted = [(s, seq) for s, seq in best if all(contains(seq, p) for p in phrases)][:3]
    hyps = constrained_beam_search(
        ScriptedStepper(k, vocab),
        torch.tensor([max_len]),
        SearchRules(**COMMON),
        [phrases],
        beam_size=k,
        n_best=3,
    )[0]
    assert [h.tokens for h in hyps] == [seq for _, seq in wanted]
    assert [h.score for h in hyps] == pytest.approx([s for s, _ in wanted], abs=1e-4)


def test_every_constraint_appears_in_every_output():
    rng, vocab = random.Random(0), 12
    real = [t for t in range(vocab) if t not in BANNED and t != EOS]
    constraints = [
        [[rng.choice(real) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 3))]
        for _ in range(30)
    ]
    for k in (1, 4):
        hyps = constrained_beam_search(
            ScriptedStepper(30 * k, vocab, eos_bias=2.0),
            torch.full((30,), 3),
            SearchRules(**COMMON),
            constraints,
            beam_size=k,
        )  # EOS is likely and the cap short: the search must make room for the phrases
        for phrases, (h,) in zip(constraints, hyps, strict=True):
            assert all(contains(h.tokens, p) for p in phrases), (phrases, h.tokens)


def test_progress_is_undone_when_a_phrase_is_left_half_way():
    phrases = [[4, 5, 6], [7]]
    state = Progress((False, False))
    steps = [(4, 1, (0, 1)), (5, 2, (0, 2)), (7, 1, None), (4, 2, (0, 1)), (5, 3, (0, 2)), (6, 4, None)]
    for token, met, inside in steps:
        state = state.after(token, phrases)
        assert (state.tokens_met(phrases), state.inside) == (met, inside)
    assert state.complete() and state.allowed(phrases) == set()
    assert Progress((False, False), (0, 1)).allowed(phrases) == {5}
    assert Progress((False, False)).allowed(phrases) == {4, 7}


def test_dealing_keeps_places_for_hypotheses_that_progress():
    # With one beam, plain search takes the best token; DBA still has to reach the phrase in time.
    hyps = constrained_beam_search(
        ScriptedStepper(2, 12), torch.tensor([2]), SearchRules(**COMMON), [[[11, 10, 9, 8]]], beam_size=2
    )
    assert contains(hyps[0][0].tokens, [11, 10, 9, 8])


class NaturalSentence(ScriptedStepper):
    """A model that wants to say 4 5 6 and end (p 0.45 each), gives the constrained word 7 p 0.04
    wherever it goes (7 does not move the sentence on), and EOS p 0.3 before the sentence is done."""

    def log_probs(self, prefix: tuple[int, ...]) -> torch.Tensor:
        said = [t for t in prefix if t != 7]
        natural = ([4, 5, 6, EOS] + [EOS] * len(prefix))[len(said)]
        probs = torch.zeros(self.vocab, dtype=torch.float64)
        others = [t for t in (1, 4, 5, 6) if t != natural]
        probs[others] = 0.21 / len(others)
        probs[7], probs[EOS], probs[natural] = 0.04, 0.3, 0.45
        return probs.log()


def test_an_output_ends_where_ending_is_among_the_best_choices_not_just_after_its_phrases():
    # Ending right after the phrase (7 EOS: log P -4.42, score -4.03) outscores the whole sentence
    # with it (e.g. 7 4 5 6 EOS: -6.41, score -4.72), but EOS was never among the search's best
    # choices there: as in plain beam search, the output ends only where ending ranks.
    hyps = constrained_beam_search(
        NaturalSentence(2, 8), torch.tensor([10]), SearchRules(**COMMON), [[[7]]], beam_size=2
    )
    tokens = hyps[0][0].tokens
    assert 7 in tokens and [t for t in tokens if t != 7] == [4, 5, 6], tokens
