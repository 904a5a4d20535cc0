"""When a training run ends, and when it writes a checkpoint by the clock (section 5.2).

Before an update: the step or epoch budget. After it: early stopping on the dev loss (no better
than the best for `patience` evaluations), a stop signal (aiayn.train.signals), the time budget of
this invocation, and whether `save_minutes` have passed since the last checkpoint. Signals and
clocks differ between ranks, so these three are agreed on by all ranks in one collective: one rank
stopping while the others wait for it would hang the run.
"""

from __future__ import annotations

import torch

from aiayn.train import distributed
from aiayn.train.checkpointer import LoopState
from aiayn.train.clock import RunClock
from aiayn.train.distributed import DistEnv
from aiayn.train.signals import StopSignals


class StopRules:
    """A run's stop rules. Reasons: max_steps | max_epochs | minutes | early_stop | signal:<NAME>."""

    def __init__(
        self,
        env: DistEnv,
        signals: StopSignals,
        *,
        max_steps: int | None = None,
        max_epochs: int | None = None,
        minutes: float | None = None,
        save_minutes: float | None = None,
        patience: int | None = None,
    ):
        self.env, self.signals = env, signals
        self.max_steps, self.max_epochs, self.minutes = max_steps, max_epochs, minutes
        self.save_minutes, self.patience = save_minutes, patience

    def before_update(self, step: int, epochs_done: int) -> str | None:
        """Why the run ends before another update (its budget is spent), or None."""
        if self.max_steps is not None and step >= self.max_steps:
            return "max_steps"
        if self.max_epochs is not None and epochs_done >= self.max_epochs:
            return "max_epochs"
        return None

    def early_stop(self, state: LoopState, dev_loss: float) -> str | None:
        """Count a dev evaluation in `state` (best loss, evaluations since); 'early_stop' when
        `patience` evaluations in a row were no better than the best."""
        if state.best_dev_loss is None or dev_loss < state.best_dev_loss:
            state.best_dev_loss, state.bad_evals = dev_loss, 0
        else:
            state.bad_evals += 1
        return "early_stop" if self.patience is not None and state.bad_evals >= self.patience else None

    def after_update(self, clock: RunClock, reason: str | None = None) -> tuple[str | None, bool]:
        """After an update (`reason`: an early stop found in it, or None): (why the run ends now,
        or None; whether a checkpoint is due by time). A signal overrides an early stop; the time
        budget ends a run that nothing else ended; nothing is due when the run ends."""
        flags = [
            self.signals.received is not None,
            self.minutes is not None and clock.elapsed() >= self.minutes * 60,
            self.save_minutes is not None and clock.since_save() >= self.save_minutes * 60,
        ]
        if self.env.distributed:
            agreed = torch.tensor(flags, dtype=torch.int32, device=self.env.device)
            flags = [bool(x) for x in distributed.all_reduce(agreed, self.env, op="max").tolist()]
        stopped, time_up, save_due = flags
        if stopped:
            reason = f"signal:{self.signals.received or 'peer'}"
        elif time_up and reason is None:
            reason = "minutes"
        return reason, save_due and reason is None
