"""The optimizer of section 5.3 and the update size of 5.1.

Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9 (the learning rate is set every step from Eq. 3,
see schedule.py); an update holds about `update_tokens` target tokens (the paper: ~25,000) through
max_tokens x accumulation x ranks.
"""

from __future__ import annotations

import torch

from aiayn.config import RunConfig
from aiayn.errors import AiaynError


def accumulation_steps(config: RunConfig, world_size: int) -> int:
    """Micro-batches per rank per update: update_tokens / (max_tokens x ranks), at least 1."""
    train = config.train
    if train.accumulation is not None:
        if train.accumulation < 1:
            raise AiaynError(f"accumulation must be at least 1, got {train.accumulation}")
        return train.accumulation
    return max(1, round(train.update_tokens / (train.max_tokens * world_size)))


def _settings(config: RunConfig, device: torch.device) -> dict:
    t = config.train
    fast = {"fused": True, "foreach": None} if device.type == "cuda" else {"fused": None, "foreach": True}
    return dict(betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps, weight_decay=t.weight_decay, **fast)


def build_optimizer(model: torch.nn.Module, config: RunConfig, device: torch.device) -> torch.optim.Adam:
    """Adam (5.3): beta1 0.9, beta2 0.98, eps 1e-9; fused kernels on GPUs, foreach on the CPU."""
    return torch.optim.Adam(model.parameters(), lr=0.0, **_settings(config, device))


def restore_optimizer(
    optimizer: torch.optim.Adam, saved: dict, config: RunConfig, device: torch.device
) -> None:
    """Load the saved moments and step counts; the settings are this run's (a `--set` on resume
    counts, and a checkpoint from a GPU resumes on a CPU)."""
    optimizer.load_state_dict(saved)
    for group in optimizer.param_groups:
        group.update(_settings(config, device))
