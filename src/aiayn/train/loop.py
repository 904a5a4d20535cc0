"""The skeleton of a training loop: one for `aiayn train` (section 5) and `aiayn vision-train`.

What does not depend on what is trained lives here, once: the loop state a checkpoint carries
besides weights, optimizer and RNG states (`LoopState`); exact resume from the newest checkpoint
and atomic saves (aiayn.train.checkpoint), one RNG state per rank; the data position (a
`BatchStream`); metrics.jsonl, TensorBoard and the progress bar (aiayn.train.metrics); the clock
that says early how long the budget takes (aiayn.train.eta); and, after each update, the train row
every `log_every` steps, evaluations, stop signals, the time budget and checkpoints every
`save_minutes`, agreed on by all ranks.

A trainer subclasses `TrainingLoop`, builds `model`, `optimizer` and `stream`, calls `_resume()`,
and supplies one update (`_update`), its budget (`_budget_reason`), its train row (`_log_train`)
and its evaluation (`_evaluation_due`, `_evaluate`); the other hooks have defaults.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from aiayn.errors import AiaynError
from aiayn.train import checkpoint, distributed, eta
from aiayn.train.metrics import MetricsLog, Progress
from aiayn.train.signals import StopSignals

STATE_VERSION = 1


@dataclass
class LoopState:
    """Everything besides weights, optimizer and RNG that a checkpoint must carry for exact resume."""

    step: int = 0
    epoch: int = 0  # data position: the next batch is batches(epoch)[index]
    index: int = 0
    tokens: int = 0  # what the updates trained on, all ranks: target tokens, or images
    seconds: float = 0.0  # wall-clock time of the run so far, across resumes
    best_dev_loss: float | None = None
    bad_evals: int = 0  # dev evaluations since the best one (early stopping)
    nonfinite: int = 0  # consecutive updates skipped for a non-finite loss


class TrainingLoop(ABC):
    """State, checkpoints, logs and the stop rules around a trainer's updates.

    The subclass sets `run_dir`, `env` (aiayn.train.distributed.DistEnv), `t` (its training config:
    log_every, save_minutes, keep_last), `model`, `optimizer`, and after `_resume()` the `stream`.
    """

    # -- what the trainer supplies ----------------------------------------------------------------
    @abstractmethod
    def _update(self) -> bool:
        """One update (state.step and state.tokens advanced); False if it was skipped."""

    @abstractmethod
    def _budget_reason(self) -> str | None:
        """Before each update: why the run ends now (its budget is spent), or None."""

    @abstractmethod
    def _log_train(self) -> None:
        """The train row of metrics.jsonl and the bar, for the updates since the last one."""

    @abstractmethod
    def _evaluation_due(self) -> bool:
        """Whether a dev evaluation is due after this update."""

    @abstractmethod
    def _evaluate(self) -> str | None:
        """A dev evaluation (not counted in the budget clock); 'early_stop' ends the run."""

    # -- checkpoints ------------------------------------------------------------------------------
    def _resume(self) -> None:
        """Restore the newest checkpoint of `run_dir`, if there is one; else start at step 0."""
        found = checkpoint.list_checkpoints(self.run_dir)
        self.state = LoopState()
        if found:
            self._restore(found[-1])
        self.start_step = self.state.step
        self.saved_path = found[-1] if found else None
        self.saved_step = self.state.step if found else -1

    def _restore(self, path: Path) -> None:
        state = checkpoint.load_checkpoint(path, self.model, self.env.device)
        if state.get("version") != STATE_VERSION:
            raise AiaynError(f"{path}: trainer state version {state.get('version')!r} is not {STATE_VERSION}")
        self.state = LoopState(**state["loop"])
        self._load_optimizer(state["optimizer"])
        self._restore_extra(state)
        rngs = state["rng"] if isinstance(state["rng"], list) else [state["rng"]]  # one process's
        world_size = state.get("world_size", 1)
        if world_size == self.env.world_size:
            checkpoint.set_rng_state(rngs[self.env.rank])
        else:  # another world size: batches are re-sharded, so the resume cannot be exact
            self.state.index = self.state.index * world_size // self.env.world_size
        if self.env.is_main:
            print(f"resuming from {path} (step {self.state.step})", flush=True)

    def _save(self) -> Path:
        """Checkpoint the weights and everything else exact resume needs (every rank's RNG state)."""
        self.state.epoch, self.state.index = self.stream.position
        self.state.seconds = self._seconds()
        rngs = [checkpoint.rng_state()]
        if self.env.distributed:
            rngs = [None] * self.env.world_size
            dist.all_gather_object(rngs, checkpoint.rng_state())
        state = {
            "version": STATE_VERSION,
            "loop": asdict(self.state),
            "optimizer": self.optimizer.state_dict(),
            "rng": rngs,
            "world_size": self.env.world_size,
            **self._extra_state(),
        }
        step = self.state.step
        path = self.run_dir / checkpoint.CHECKPOINTS / checkpoint.checkpoint_name(step)
        if self.env.is_main:
            path = checkpoint.save_checkpoint(self.run_dir, step, self.model, state, self.t.keep_last)
        distributed.barrier(self.env)
        self.saved_path, self.saved_step, self.saved_time = path, step, time.monotonic()
        return path

    def _load_optimizer(self, saved: dict) -> None:
        self.optimizer.load_state_dict(saved)

    def _extra_state(self) -> dict:
        """What else the trainer's checkpoints carry (plain values only)."""
        return {}

    def _restore_extra(self, state: dict) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Read back what `_extra_state` saved."""

    # -- the clock, the logs ----------------------------------------------------------------------
    def _open(self, progress: bool, max_steps: int | None, minutes: float | None, **clock) -> None:
        """Start this invocation's clocks, metrics log (rows after the resume point dropped) and bar.
        `clock`: BudgetClock's `rate` and `unit`."""
        self.started = self.saved_time = self.window_start = time.monotonic()
        self.seconds_before = self.state.seconds  # earlier invocations', fixed for this one
        main = self.env.is_main
        self.log = MetricsLog(self.run_dir, main)
        self.log.truncate(self.state.step)
        self.progress = Progress(progress and main, self.state.step, max_steps, minutes, messages=main)
        self.clock = eta.BudgetClock(self.start_step, max_steps, minutes, self.started, **clock)
        self._logged_step = self.state.step

    def _close(self) -> None:
        self.progress.close()
        self.log.close()

    def _seconds(self) -> float:
        """Wall-clock seconds of the whole run: earlier invocations' and this one's.

        Counted from `seconds_before`, not from `state.seconds`: each checkpoint stores this sum in
        `state.seconds`, and adding the elapsed time to that again would count it once per save.
        """
        return self.seconds_before + time.monotonic() - self.started

    @contextlib.contextmanager
    def _paused(self):
        """Work other than updates (evaluation, checkpoints): left out of the budget clock's span and
        of the rates of the current log window (`window_start`)."""
        began = time.monotonic()
        yield
        seconds = time.monotonic() - began
        self.clock.pause(seconds)
        self.window_start += seconds

    def _say_timing(self) -> None:
        """Once, early in the run: the measured speed and when the budget ends (aiayn.train.eta)."""
        row = self.clock.after_update(self.state.step, self.state.tokens)
        if row is not None:
            self._adjust_timing(row)
            self.log.log("eta", self.state.step, row)
            self.progress.write(self.clock.message(row, self.state.step))

    def _adjust_timing(self, row: dict) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Change the clock's row in place (say, to count evaluations still to come)."""

    def _log(self) -> None:
        self._log_train()
        self._logged_step = self.state.step

    # -- the loop ---------------------------------------------------------------------------------
    def _time_up(self) -> bool:
        """Whether the trainer's time budget is spent (checked after each update, on every rank)."""
        return False

    def _checkpoint_due(self) -> bool:
        """Whether a checkpoint is due by step count (besides every `save_minutes`)."""
        return False

    def _control(self, signals: StopSignals) -> tuple[bool, bool, bool]:
        """(signal received, time budget spent, checkpoint due by time), agreed on by all ranks."""
        minutes = self.t.save_minutes
        flags = [
            signals.received is not None,
            self._time_up(),
            minutes is not None and time.monotonic() - self.saved_time >= minutes * 60,
        ]
        if self.env.distributed:
            agreed = torch.tensor(flags, dtype=torch.int32, device=self.env.device)
            flags = [bool(x) for x in distributed.all_reduce(agreed, self.env, op="max").tolist()]
        return flags[0], flags[1], flags[2]

    def _after_update(self, signals: StopSignals) -> str | None:
        """The train row, an evaluation, the stop rules and a checkpoint when due; a stop reason."""
        reason = None
        if self.state.step % self.t.log_every == 0:
            self._log()
        if self._evaluation_due():
            with self._paused():
                reason = self._evaluate()
        stopped, time_up, save_due = self._control(signals)
        if stopped:
            reason = f"signal:{signals.received or 'peer'}"
        elif time_up and reason is None:
            reason = "minutes"
        if reason is None and (save_due or self._checkpoint_due()):
            with self._paused():
                self._save()
        return reason

    def _timed_update(self) -> bool:
        applied = self._update()
        if applied:
            self._say_timing()
        return applied

    def _train(self, signals: StopSignals) -> str:
        """Updates until a stop reason; then the last steps' train row and a final checkpoint."""
        reason = None
        while reason is None:
            reason = self._budget_reason()
            if reason is None and self._timed_update():
                reason = self._after_update(signals)
        if self.state.step > self._logged_step:  # the steps since the last log_every
            self._log()
        if self.saved_step != self.state.step:
            self._save()
        return reason
