"""An image classifier over a whole split (aiayn.vision.evaluate): the mean negative log-likelihood
and the accuracy equal one pass over all images computed directly, whatever the batch size."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aiayn.vision.evaluate import evaluate


class Flat(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 3)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):  # (batch, 1, 4, 4) -> (batch, 3)
        return self.linear(self.dropout(x.flatten(1)))


@pytest.mark.parametrize("batch_size", [1, 3, 1000])
def test_nll_and_accuracy_match_a_direct_computation_in_eval_mode(batch_size):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 4, 4), dtype=np.uint8)
    labels = rng.integers(0, 3, size=7).astype(np.int64)
    model = Flat()
    nll, accuracy = evaluate(model, images, labels, batch_size=batch_size)
    assert not model.training  # dropout off: the figures are deterministic
    with torch.no_grad():
        logits = model.linear(torch.tensor(images, dtype=torch.float64).flatten(1).div(255).float())
    want = F.cross_entropy(logits.double(), torch.from_numpy(labels), reduction="mean").item()
    assert nll == pytest.approx(want, rel=1e-5)
    assert accuracy == (logits.argmax(-1).numpy() == labels).mean()


def test_an_empty_split_is_zero_not_a_division_by_zero():
    empty = np.zeros((0, 4, 4), dtype=np.uint8)
    assert evaluate(Flat(), empty, np.zeros(0, dtype=np.int64)) == (0.0, 0.0)
