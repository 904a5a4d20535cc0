"""Eq. 3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

import math

import pytest

from aiayn.config import ModelConfig, TrainConfig
from aiayn.train.schedule import learning_rate, noam_lr


@pytest.mark.parametrize(
    "step, expected",
    [
        (1, 512**-0.5 * 4000**-1.5),  # warm-up: linear in the step
        (4000, 512**-0.5 * 4000**-0.5),  # the peak, ~6.99e-4
        (16000, 512**-0.5 * 16000**-0.5),  # decay: half the peak at 4x the warm-up
    ],
)
def test_paper_values(step, expected):
    assert noam_lr(step, 512, 4000) == pytest.approx(expected, rel=1e-12)


def test_known_numbers():
    assert noam_lr(1, 512, 4000) == pytest.approx(1.7469e-7, rel=1e-4)
    assert noam_lr(4000, 512, 4000) == pytest.approx(6.9877e-4, rel=1e-4)
    assert noam_lr(16000, 512, 4000) == pytest.approx(3.4939e-4, rel=1e-4)
    assert noam_lr(16000, 512, 4000) == pytest.approx(noam_lr(4000, 512, 4000) / 2)


def test_scale_and_peak():
    assert noam_lr(100, 512, 4000, scale=2.0) == pytest.approx(2 * noam_lr(100, 512, 4000))
    assert noam_lr(200, 256, 200, peak=1e-3) == pytest.approx(1e-3)
    assert noam_lr(800, 256, 200, peak=1e-3) == pytest.approx(1e-3 * math.sqrt(200 / 800))
    assert max(noam_lr(s, 256, 200, peak=1e-3) for s in range(1, 2000)) == pytest.approx(1e-3)


def test_learning_rate_reads_the_configs():
    model = ModelConfig.preset("base")
    assert learning_rate(4000, model, TrainConfig()) == pytest.approx(512**-0.5 * 4000**-0.5)
    train = TrainConfig(warmup_steps=100, lr_scale=0.5)
    assert learning_rate(50, model, train) == pytest.approx(0.5 * 512**-0.5 * 50 * 100**-1.5)
