"""The learning-rate schedule of section 5.3, Eq. 3:

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

linear warm-up for `warmup_steps` updates, then decay with the inverse square root of the step.
`scale` multiplies the whole curve; `peak`, if given, chooses the scale so that the maximum (at
step = warmup_steps) equals `peak` - handy for short runs that want a short warm-up to a chosen
rate. The function is stateless: the rate depends on the step alone, so resuming needs no
scheduler state beyond the step.
"""

from __future__ import annotations

from aiayn.config import ModelConfig, TrainConfig


def noam_lr(
    step: int, d_model: int, warmup_steps: int, scale: float = 1.0, peak: float | None = None
) -> float:
    """Eq. 3 at update `step` (counted from 1)."""
    step = max(step, 1)
    if peak is not None:
        scale = peak / (d_model**-0.5 * warmup_steps**-0.5)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def learning_rate(step: int, model: ModelConfig, train: TrainConfig) -> float:
    """The rate for update `step` under a run's configs (lr_scale, lr_peak, warmup_steps)."""
    return noam_lr(step, model.d_model, train.warmup_steps, train.lr_scale, train.lr_peak)
