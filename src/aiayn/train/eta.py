"""How long a step budget will take on this machine, measured on the run's own first updates.

A run's speed differs threefold between CPUs, so no figure in a README predicts it: after the first
updates (`SKIP`, which probe the matrix-product backend and build kernels) `BudgetClock` times the
next `SPAN` and says how long the rest of the step budget takes (capped by a time budget), once.
Time spent in dev evaluations and checkpoints during the span is not counted.
"""

from __future__ import annotations

import time

from aiayn.runtime import kernels

SKIP, SPAN = len(kernels.ORDER) + 2, 20  # updates


def duration(seconds: float) -> str:
    """'45 s', '12 min' or '1 h 05 min'."""
    seconds = max(seconds, 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class BudgetClock:
    """Times updates SKIP+1 .. SKIP+SPAN of this invocation and predicts the rest of the budget.

    What the updates consume is counted in `unit` (target tokens, images) and its rate reported
    under the key `rate` (tok_s, img_s).
    """

    def __init__(
        self,
        start_step: int,
        max_steps: int | None,
        minutes: float | None,
        started: float,
        rate: str = "tok_s",
        unit: str = "target tokens",
    ):
        self.start_step, self.max_steps, self.minutes, self.started = start_step, max_steps, minutes, started
        self.rate, self.unit = rate, unit
        self.began: tuple[float, int] | None = None  # (time, tokens) when the timed span began
        self.paused = 0.0  # evaluation and checkpoint seconds inside the span

    def pause(self, seconds: float) -> None:
        """Time the run spent on other work than updates (evaluation, checkpoints)."""
        if self.began is not None:
            self.paused += seconds

    def after_update(self, step: int, tokens: int) -> dict | None:
        """At the end of the span: {s_per_update, <rate>, seconds_left}; None before and after.
        `tokens`: the units consumed so far (any origin: only differences count)."""
        done = step - self.start_step
        if done == SKIP:
            self.began = (time.monotonic(), tokens)
        if done != SKIP + SPAN or self.max_steps is None or self.began is None:
            return None
        began, tokens_then = self.began
        seconds = time.monotonic() - began - self.paused
        per_update = seconds / SPAN
        left = max(self.max_steps - step, 0) * per_update
        if self.minutes is not None:
            left = min(left, self.minutes * 60 - (time.monotonic() - self.started))
        return {
            "s_per_update": per_update,
            self.rate: (tokens - tokens_then) / seconds,
            "seconds_left": max(left, 0),
        }

    def message(self, row: dict, step: int) -> str:
        """One line: the measured speed (units per second) and when the rest of the budget ends."""
        end = time.strftime("%H:%M", time.localtime(time.time() + row["seconds_left"]))
        return (
            f"timing: {row['s_per_update']:.2f} s per update ({row[self.rate]:,.0f} {self.unit}/s) over "
            f"updates {self.start_step + SKIP + 1}-{step}: the rest takes about "
            f"{duration(row['seconds_left'])} on this machine (until about {end})"
        )
