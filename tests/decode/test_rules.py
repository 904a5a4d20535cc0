"""Target prefixes: the search continues a forced start of the output (fairseq's prefix_tokens)."""

from __future__ import annotations

import pytest
import torch
from scripted import BANNED, BOS, EOS, ScriptedStepper, exhaustive

from aiayn.decode.rules import Prefixes, SearchRules
from aiayn.decode.strategies import beam_search, greedy_search

COMMON = dict(start_id=BOS, eos_id=EOS, banned=BANNED)


def greedy(prefixes: list[list[int]] | None, max_lens: list[int], vocab: int = 12):
    stepper = ScriptedStepper(len(max_lens), vocab, eos_bias=-3.0)  # long outputs
    forced = None if prefixes is None else Prefixes(prefixes, EOS, BANNED)
    return greedy_search(stepper, torch.tensor(max_lens), SearchRules(prefixes=forced, **COMMON))


def test_a_prefix_of_the_free_output_leaves_the_rest_unchanged():
    max_lens = [12, 9, 15]
    free = [h[0] for h in greedy(None, max_lens)]
    assert all(len(h.tokens) >= 3 for h in free)
    for k in range(len(free[0].tokens) + 1):
        prefixes = [h.tokens[:k] for h in free]
        forced = [h[0] for h in greedy(prefixes, max_lens)]
        assert [h.tokens for h in forced] == [h.tokens for h in free]
        assert [h.log_prob for h in forced] == pytest.approx([h.log_prob for h in free], abs=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_finds_the_best_output_that_starts_with_the_prefix(alpha):
    vocab, max_len, k = 7, 4, 400
    best = exhaustive(ScriptedStepper(1, vocab), max_len, alpha, "gnmt")
    prefix = best[7][1][:2]  # the start of a runner-up: not where free search goes
    assert best[0][1][:2] != prefix
    wanted = [(score, seq) for score, seq in best if seq[:2] == prefix][:3]
    hyps = beam_search(
        ScriptedStepper(k, vocab),
        torch.tensor([max_len]),
        SearchRules(alpha=alpha, prefixes=Prefixes([prefix], EOS, BANNED), **COMMON),
        beam_size=k,
        n_best=3,
    )[0]
    assert [h.tokens for h in hyps] == [seq for _, seq in wanted]
    assert [h.score for h in hyps] == pytest.approx([score for score, _ in wanted], abs=1e-4)


def least_likely(stepper: ScriptedStepper, prefix: tuple[int, ...]) -> int:
    allowed = [t for t in range(stepper.vocab) if t not in BANNED and t != EOS]
    return min(allowed, key=lambda t: float(stepper.log_probs(prefix)[t]))


def test_an_improbable_prefix_is_honoured_and_scored_as_the_model_scores_it():
    stepper = ScriptedStepper(1, 12)
    worst = [least_likely(stepper, ())]
    worst.append(least_likely(stepper, tuple(worst)))
    for beam in (1, 4):
        hyp = beam_search(
            ScriptedStepper(beam, 12),
            torch.tensor([1]),
            SearchRules(prefixes=Prefixes([worst], EOS, BANNED), **COMMON),
            beam_size=beam,
        )[0][0]
        assert hyp.tokens[:2] == worst  # longer than max_len 1: the prefix makes room for itself
        logp = sum(float(stepper.log_probs(tuple(hyp.tokens[:i]))[t]) for i, t in enumerate(hyp.tokens))
        logp += float(stepper.log_probs(tuple(hyp.tokens))[EOS])
        assert hyp.log_prob == pytest.approx(logp, abs=1e-4)


def test_sentences_with_and_without_prefixes_share_a_batch():
    max_lens = [10, 10, 10]
    free = [h[0].tokens for h in greedy(None, max_lens)]
    mixed = [h[0].tokens for h in greedy([[], free[1][:4], []], max_lens)]
    assert mixed == free


def test_a_prefix_may_not_hold_eos_or_banned_tokens():
    with pytest.raises(ValueError, match="prefix 2"):
        Prefixes([[5], [5, EOS]], EOS, BANNED)
    with pytest.raises(ValueError, match="prefix 1"):
        Prefixes([[BOS]], EOS, BANNED)
