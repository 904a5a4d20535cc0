"""The run clock of a training loop (section 5.2: checkpoints at time intervals, a time budget).

One invocation's wall clock and the whole run's across resumes: `seconds()` is what checkpoints
store (earlier invocations' time plus this one's), `elapsed()` what `aiayn train --minutes` limits.
Work other than updates (dev evaluations, checkpoints) runs inside `paused()`: it is left out of the
rates of the log window (`lap()`) and of the early timing of the budget (`eta`, an
aiayn.train.eta.BudgetClock). `since_save()` is the save clock that `save_minutes` reads.
"""

from __future__ import annotations

import contextlib
import time

from aiayn.train.eta import BudgetClock


class RunClock:
    """Started when a trainer's loop starts; `seconds_before`: the run's seconds at its resume point."""

    def __init__(
        self,
        seconds_before: float,
        start_step: int,
        max_steps: int | None,
        minutes: float | None,
        rate: str = "tok_s",
        unit: str = "target tokens",
    ):
        """`start_step`, `max_steps`, `minutes`, `rate`, `unit`: the budget timing's (BudgetClock)."""
        self.started = self.lap_start = self.saved_at = time.monotonic()
        self.seconds_before = seconds_before  # earlier invocations', fixed for this one
        self.eta = BudgetClock(start_step, max_steps, minutes, self.started, rate=rate, unit=unit)

    def elapsed(self) -> float:
        """Seconds since this invocation's loop started."""
        return time.monotonic() - self.started

    def seconds(self) -> float:
        """Wall-clock seconds of the whole run: earlier invocations' and this one's.

        Counted from `seconds_before`, not from a checkpoint's stored seconds: each checkpoint stores
        this sum, and adding the elapsed time to that again would count it once per save.
        """
        return self.seconds_before + self.elapsed()

    @contextlib.contextmanager
    def paused(self):
        """Work other than updates: left out of the budget timing and of the current lap."""
        began = time.monotonic()
        yield
        seconds = time.monotonic() - began
        self.eta.pause(seconds)
        self.lap_start += seconds

    def lap(self) -> float:
        """Seconds of updates since the last lap (or the start), pauses left out; starts the next."""
        now = time.monotonic()
        seconds, self.lap_start = now - self.lap_start, now
        return seconds

    def saved(self) -> None:
        """A checkpoint was just written: the save clock starts again."""
        self.saved_at = time.monotonic()

    def since_save(self) -> float:
        """Seconds since this invocation's last checkpoint (or its start)."""
        return time.monotonic() - self.saved_at
