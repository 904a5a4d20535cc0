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


def update_record(config: RunConfig, world_size: int, accumulation: int) -> dict:
    """What a checkpoint says of its update size: ranks, micro-batches per rank, and the settings
    they came from (max_tokens, update_tokens, accumulation)."""
    t = config.train
    settings = [t.max_tokens, t.update_tokens, t.accumulation]
    return {"world_size": world_size, "accumulation": accumulation, "settings": settings}


def _ranks(n: int) -> str:
    return f"{n} rank" if n == 1 else f"{n} ranks"


def resumed_accumulation(config: RunConfig, world_size: int, saved: dict) -> tuple[int, str | None]:
    """Micro-batches per rank for a run that resumes from checkpoint state `saved` ({}: a new run),
    and on another number of ranks the line that says so. The update keeps its size, accumulation x
    ranks batches of up to max_tokens tokens (5.1), unless the update settings changed since (then
    they count, as `accumulation_steps` reads them); when that product cannot be kept (8 batches on 3
    ranks) the nearest one is taken and the line says so."""
    wanted = accumulation_steps(config, world_size)
    if not saved:
        return wanted, None
    ranks = saved.get("world_size", 1)  # checkpoints before the update record: as they were derived
    before = saved.get("update") or update_record(config, ranks, accumulation_steps(config, ranks))
    changed = before["settings"] != update_record(config, ranks, 0)["settings"]
    if ranks == world_size:
        return (wanted if changed else before["accumulation"]), None
    batches, tokens = before["accumulation"] * ranks, config.train.max_tokens
    accumulation = wanted if changed else max(1, round(batches / world_size))
    head = f"resuming on {_ranks(world_size)}, saved on {_ranks(ranks)}"
    update = f"{accumulation * world_size} batches of up to {tokens} tokens an update"
    if changed:
        what = f"with new update settings: accumulation {accumulation}, {update}"
    elif accumulation * world_size == batches:
        what = f"accumulation {before['accumulation']} -> {accumulation} keeps {update}"
    else:
        what = f"accumulation {before['accumulation']} -> {accumulation}: {update}, not {batches} as before"
    return accumulation, f"{head}: {what}; the batches go on in the same order, dropout draws afresh"


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
