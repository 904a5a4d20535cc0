"""A trainer's checkpoints (section 5.2), for exact resume: what is saved and how it comes back.

`LoopState` is what a checkpoint carries besides weights, optimizer and RNG states: the step, the
data position, the counts behind the stop rules. `Checkpointer.restore` reads the newest checkpoint
of a run directory back into the model, the optimizer and this rank's RNG (on another number of
ranks the position becomes the epoch's global batch, where the new ranks' dealing starts, and the
ranks' RNG states, which have no counterpart, are not restored);
`Checkpointer.save` writes one atomically (aiayn.train.checkpoint) with every rank's RNG state.
Whatever else a trainer keeps (a loss scaler, a kernel choice) travels as plain values in `extra`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from aiayn.errors import AiaynError
from aiayn.train import checkpoint, distributed
from aiayn.train.distributed import DistEnv

STATE_VERSION = 1


@dataclass
class LoopState:
    """Everything besides weights, optimizer and RNG that a checkpoint must carry for exact resume."""

    step: int = 0
    epoch: int = 0  # data position: the next batch is batches(epoch, start)[index]
    index: int = 0
    start: int = 0  # the epoch's global batch where this rank's share began (aiayn.data.batching)
    tokens: int = 0  # what the updates trained on, all ranks: target tokens, or images
    seconds: float = 0.0  # wall-clock time of the run so far, across resumes
    best_dev_loss: float | None = None
    bad_evals: int = 0  # dev evaluations since the best one (early stopping)
    nonfinite: int = 0  # consecutive updates skipped for a non-finite loss


class Checkpointer:
    """The checkpoints of `run_dir` for `model` and `optimizer`; `path` and `step`: the newest one
    this trainer restored or wrote (None and -1 before any)."""

    def __init__(self, run_dir: Path, env: DistEnv, model: torch.nn.Module, optimizer, keep_last: int):
        self.run_dir, self.env, self.keep_last = run_dir, env, keep_last
        self.model, self.optimizer = model, optimizer
        self.path: Path | None = None
        self.step = -1

    def restore(self, load_optimizer: Callable[[dict], None] | None = None) -> tuple[LoopState, dict]:
        """The newest checkpoint's loop state and everything it saved (the trainer's `extra` entries
        among it), the weights, optimizer and RNG restored in place; a fresh state and {} if none.
        `load_optimizer`: how the saved optimizer state is loaded (default: load_state_dict)."""
        found = checkpoint.list_checkpoints(self.run_dir)
        if not found:
            return LoopState(), {}
        path = found[-1]
        saved = checkpoint.load_checkpoint(path, self.model, self.env.device)
        if saved.get("version") != STATE_VERSION:
            raise AiaynError(f"{path}: trainer state version {saved.get('version')!r} is not {STATE_VERSION}")
        state = LoopState(**saved["loop"])
        (load_optimizer or self.optimizer.load_state_dict)(saved["optimizer"])
        rngs = saved["rng"] if isinstance(saved["rng"], list) else [saved["rng"]]  # one process's
        world_size = saved.get("world_size", 1)
        if world_size == self.env.world_size:
            checkpoint.set_rng_state(rngs[self.env.rank])
        else:  # another number of ranks: they deal the rest of the epoch from the global batch reached
            state.start, state.index = state.start + state.index * world_size, 0
        if self.env.is_main:
            print(f"resuming from {path} (step {state.step})", flush=True)
        self.path, self.step = path, state.step
        return state, saved

    def save(self, state: LoopState, position: tuple[int, ...], seconds: float, extra: dict | None = None):
        """Checkpoint the weights and everything else exact resume needs: `state` with the data
        `position` (epoch, index, and start when not 0) and the run's `seconds` written into it, every
        rank's RNG state, and `extra` (plain values only). Every rank calls it; rank 0 writes.
        -> the checkpoint's path."""
        state.epoch, state.index = position[:2]
        state.start = position[2] if len(position) > 2 else 0
        state.seconds = seconds
        rngs = [checkpoint.rng_state()]
        if self.env.distributed:
            rngs = [None] * self.env.world_size
            dist.all_gather_object(rngs, checkpoint.rng_state())
        saved = {
            "version": STATE_VERSION,
            "loop": asdict(state),
            "optimizer": self.optimizer.state_dict(),
            "rng": rngs,
            "world_size": self.env.world_size,
            **(extra or {}),
        }
        path = self.run_dir / checkpoint.CHECKPOINTS / checkpoint.checkpoint_name(state.step)
        if self.env.is_main:
            path = checkpoint.save_checkpoint(self.run_dir, state.step, self.model, saved, self.keep_last)
        distributed.barrier(self.env)
        self.path, self.step = path, state.step
        return path
