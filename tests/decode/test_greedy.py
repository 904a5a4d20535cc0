"""Greedy search (aiayn.decode.greedy) on a scripted model: the argmax at every step, scored."""

from __future__ import annotations

import math

import pytest
import torch
from scripted import BANNED, BOS, EOS, ScriptedStepper

from aiayn.decode.rules import SearchRules, length_penalty
from aiayn.decode.strategies import greedy_search


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
