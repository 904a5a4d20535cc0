"""Ensembles (aiayn.decode.ensemble): the mean of the models' probabilities, one vocabulary."""

from __future__ import annotations

import pytest
import torch

from aiayn.decode.ensemble import EnsembleStepper, check_shared_vocabulary
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from toy_translation import toy_pairs


def test_an_ensemble_of_a_model_with_itself_is_the_model(translator, toy_model_dir):
    pair = Translator.load([toy_model_dir, toy_model_dir], device="cpu")
    texts = [s for s, _ in toy_pairs(10, seed=9)]
    one, two = translator.translate_batch(texts, n_best=2), pair.translate_batch(texts, n_best=2)
    assert [[t.text for t in ts] for ts in one] == [[t.text for t in ts] for ts in two]
    for ts, us in zip(one, two, strict=True):
        assert [t.score for t in ts] == pytest.approx([u.score for u in us], abs=1e-4)


def test_an_ensemble_needs_one_vocabulary():
    specials = [(0, 2, 3, 2)] * 2
    check_shared_vocabulary(["a", "b"], [["x", "y"], ["x", "y"]], specials)
    with pytest.raises(AiaynError, match=r"^b: its vocabulary differs from a's \(id 1 is 'z', not 'y'\)"):
        check_shared_vocabulary(["a", "b"], [["x", "y"], ["x", "z"]], specials)
    with pytest.raises(AiaynError, match="b: special token ids"):
        check_shared_vocabulary(["a", "b"], [["x"], ["x"]], [(0, 2, 3, 2), (1, 2, 3, 2)])


class FixedStepper:
    """A stepper whose next-token log-probabilities are given; it records reorder and select."""

    def __init__(self, logp: torch.Tensor):
        self.logp, self.calls = logp, []

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logp[: len(tokens)]

    def reorder(self, index: torch.Tensor) -> None:
        self.calls.append(("reorder", index.tolist()))

    def select(self, index: torch.Tensor) -> None:
        self.calls.append(("select", index.tolist()))


def test_an_ensemble_step_is_the_log_of_the_mean_probability():
    torch.manual_seed(0)
    logps = [torch.randn(3, 7).log_softmax(-1) for _ in range(3)]  # 3 models: (rows, vocab) each
    steppers = [FixedStepper(lp) for lp in logps]
    got = EnsembleStepper(steppers).step(torch.zeros(3, dtype=torch.long))  # (rows, vocab)
    expected = torch.stack([lp.double().exp() for lp in logps]).mean(0).log()
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-6)
    assert torch.allclose(got.exp().sum(-1), torch.ones(3))  # a distribution again
    EnsembleStepper(steppers).reorder(torch.tensor([2, 0]))
    EnsembleStepper(steppers).select(torch.tensor([1]))
    assert all(s.calls == [("reorder", [2, 0]), ("select", [1])] for s in steppers)


def test_an_ensemble_of_one_is_that_model_and_of_none_an_error():
    logp = torch.randn(2, 5).log_softmax(-1)
    assert torch.equal(EnsembleStepper([FixedStepper(logp)]).step(torch.zeros(2)), logp)
    with pytest.raises(ValueError, match="at least one model"):
        EnsembleStepper([])
