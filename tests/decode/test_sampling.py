"""Sampling against the exact distribution of every output of a scripted model (chi-square)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy.stats import chisquare
from scripted import BANNED, BOS, EOS, ScriptedStepper

from aiayn.config import ConfigError, SamplingConfig
from aiayn.decode.rules import Prefixes, SearchRules
from aiayn.decode.sampling import filter_log_probs, gumbel_noise, row_keys
from aiayn.decode.strategies import greedy_search, sample_search

VOCAB, MAX_LEN = 7, 2  # real tokens 1, 4, 5, 6 (0 pad, 2 bos, 3 eos)
REAL = [t for t in range(VOCAB) if t not in BANNED and t != EOS]
COMMON = dict(start_id=BOS, eos_id=EOS, banned=BANNED)


def reference_q(logp: torch.Tensor, s: SamplingConfig, eos_only: bool) -> dict[int, float]:
    """The filtered distribution, computed the slow way in float64 from its definition."""
    allowed = [EOS] if eos_only else REAL + [EOS]
    x = {t: float(logp[t]) / s.temperature for t in allowed}
    ranked = sorted(x, key=lambda t: -x[t])
    if s.top_k:
        ranked = [t for t in ranked if x[t] >= x[ranked[min(s.top_k, len(ranked)) - 1]]]
    z = sum(math.exp(x[t]) for t in ranked)
    kept, mass = [], 0.0
    for t in ranked:
        if mass < s.top_p:
            kept.append(t)
        mass += math.exp(x[t]) / z
    z = sum(math.exp(x[t]) for t in kept)
    return {t: math.exp(x[t]) / z for t in kept}


def exact_outputs(s: SamplingConfig) -> dict[tuple[int, ...], float]:
    """Probability of every output (tokens before EOS) under sampling with `s`."""
    stepper, out = ScriptedStepper(1, VOCAB, sharpness=1.0), {}
    for n in range(MAX_LEN + 1):
        for seq in itertools.product(REAL, repeat=n):
            p = 1.0
            for i in range(n + 1):
                q = reference_q(stepper.log_probs(seq[:i]).double(), s, eos_only=i == MAX_LEN)
                p *= q.get(seq[i] if i < n else EOS, 0.0)
            if p > 0:
                out[seq] = p
    return out


def draw(s: SamplingConfig, texts: int, samples: int, text_ids=None, prefixes=None):
    ids = torch.arange(texts) if text_ids is None else torch.tensor(text_ids)
    return sample_search(
        ScriptedStepper(texts * samples, VOCAB, sharpness=1.0),
        torch.full((texts,), MAX_LEN),
        SearchRules(prefixes=prefixes, **COMMON),
        row_keys(s.seed, ids, samples),
        samples=samples,
        sampling=s,
    )


def counts(hyps, outputs) -> list[int]:
    seen = [tuple(h.tokens) for hs in hyps for h in hs]
    assert set(seen) <= set(outputs)  # nothing outside the support
    return [seen.count(seq) for seq in outputs]


@pytest.mark.parametrize(
    "s",
    [
        SamplingConfig(seed=1),
        SamplingConfig(temperature=0.7, seed=2),
        SamplingConfig(temperature=1.5, top_k=3, seed=3),
        SamplingConfig(top_p=0.8, seed=4),
        SamplingConfig(temperature=1.3, top_k=4, top_p=0.9, seed=5),
    ],
)
def test_samples_follow_the_tempered_and_filtered_distribution(s):
    exact = exact_outputs(s)
    n = 12_000
    hyps = draw(s, 40, n // 40)
    expected = [p * n for p in exact.values()]
    assert chisquare(counts(hyps, exact), expected).pvalue > 1e-3
    plain = exact_outputs(SamplingConfig())  # the test can tell these distributions apart
    if s.replace(seed=0) != SamplingConfig() and plain.keys() == exact.keys():
        assert chisquare(counts(hyps, exact), [plain[k] * n for k in exact]).pvalue < 1e-6


def test_each_sample_carries_the_models_own_log_prob():
    stepper = ScriptedStepper(1, VOCAB, sharpness=1.0)
    for h in draw(SamplingConfig(temperature=2.0, seed=9), 3, 5)[0]:
        seq = tuple(h.tokens)
        logp = sum(float(stepper.log_probs(seq[:i])[t]) for i, t in enumerate(seq))
        assert h.log_prob == pytest.approx(logp + float(stepper.log_probs(seq)[EOS]), abs=1e-5)


def test_the_same_seed_and_key_give_the_same_samples_however_texts_are_batched():
    s = SamplingConfig(temperature=1.5, seed=7)
    together = draw(s, 6, 4, text_ids=[0, 1, 2, 3, 4, 5])
    apart = [draw(s, 1, 4, text_ids=[i])[0] for i in (5, 2, 0, 3, 1, 4)]
    as_tokens = lambda hs: [h.tokens for h in hs]  # noqa: E731
    assert [as_tokens(h) for h in together] == [
        as_tokens(apart[(5, 2, 0, 3, 1, 4).index(i)]) for i in range(6)
    ]
    other_seed = draw(SamplingConfig(temperature=1.5, seed=8), 6, 4)
    assert [as_tokens(h) for h in other_seed] != [as_tokens(h) for h in together]


def test_top_k_one_is_greedy_and_a_prefix_is_kept():
    s = SamplingConfig(top_k=1, seed=3)
    greedy = greedy_search(
        ScriptedStepper(2, VOCAB, sharpness=1.0), torch.full((2,), MAX_LEN), SearchRules(**COMMON)
    )
    for hs, g in zip(draw(s, 2, 3), greedy, strict=True):
        assert [h.tokens for h in hs] == [g[0].tokens] * 3
    forced = draw(SamplingConfig(seed=3), 2, 50, prefixes=Prefixes([[6], [5, 5]], EOS, BANNED))
    assert all(h.tokens[:1] == [6] for h in forced[0]) and all(h.tokens[:2] == [5, 5] for h in forced[1])


def test_gumbel_noise_is_standard_gumbel():
    g = gumbel_noise(row_keys(0, torch.arange(100), 10), 3, 1000).flatten()
    assert g.mean().item() == pytest.approx(0.5772, abs=0.01)  # Euler-Mascheroni
    assert g.var().item() == pytest.approx(math.pi**2 / 6, rel=0.02)


def test_filtering_keeps_the_smallest_nucleus():
    logp = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = filter_log_probs(logp, SamplingConfig(top_p=0.75)).exp()
    assert kept.tolist()[0] == pytest.approx([0.625, 0.375, 0.0, 0.0])
    kept = filter_log_probs(logp, SamplingConfig(top_p=0.85)).exp()
    assert kept.tolist()[0] == pytest.approx([0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0])


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"temperature": 0.0}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.2}, "top_p"),
        ({"seed": -1}, "seed must be an integer from 0"),
    ],
)
def test_bad_sampling_settings_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        SamplingConfig(**changes)
