"""What a run shows while it trains: `metrics.jsonl` (one JSON object per line), TensorBoard event
files under `tensorboard/`, and a tqdm progress bar with loss, perplexity, lr, tokens/s and ETA;
`RunLog` holds the three for a trainer's loop. Only rank 0 writes; the other ranks get a logger
that does nothing.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from aiayn.safe_io import atomic_write_text

METRICS = "metrics.jsonl"


class MetricsLog:
    """Append-only metrics.jsonl + TensorBoard scalars; `truncate(step)` drops rows after a resume point."""

    def __init__(self, run_dir: Path, enabled: bool):
        self.enabled = enabled
        self.path = run_dir / METRICS
        self._writer = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter  # imports tensorboard: ~1 s

            self._writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def truncate(self, step: int) -> None:
        """Forget rows logged after `step` (they belong to work a resumed run will redo)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = []
        for line in self.path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a row cut short by a kill in the middle of its write
            if row.get("step", 0) <= step:
                kept.append(line)
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))  # a kill leaves the old file

    def log(self, kind: str, step: int, values: dict[str, Any]) -> None:
        if not self.enabled:
            return
        row = {"kind": kind, "step": step, **values}
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
        for key, value in values.items():
            if isinstance(value, int | float) and math.isfinite(value):
                self._writer.add_scalar(f"{kind}/{key}", value, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class Progress:
    """A step-counting bar whose ETA comes from the step budget and/or the wall-clock budget."""

    def __init__(
        self, enabled: bool, step: int, max_steps: int | None, minutes: float | None, messages: bool = True
    ):
        self.max_steps, self.minutes, self.messages = max_steps, minutes, messages
        self.start_step, self.start = step, time.monotonic()
        self.bar = tqdm(
            total=max_steps,
            initial=step,
            disable=not enabled,
            unit="step",
            dynamic_ncols=True,
            file=sys.stderr,
            bar_format="{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
            if max_steps
            else "{desc}{n_fmt} steps [{elapsed}{postfix}]",
        )

    def eta(self, step: int) -> float | None:
        """Seconds left: the nearer of the step budget and the time budget."""
        elapsed = time.monotonic() - self.start
        left = []
        if self.minutes is not None:
            left.append(max(self.minutes * 60 - elapsed, 0.0))
        done = step - self.start_step
        if self.max_steps and done > 0:
            left.append((self.max_steps - step) * elapsed / done)
        return min(left) if left else None

    def update(self, step: int, **postfix: Any) -> None:
        self.bar.n = step
        eta = self.eta(step)
        if eta is not None:
            postfix["eta"] = tqdm.format_interval(eta)
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.refresh()

    def write(self, message: str) -> None:
        """A line above the bar (or on stderr when there is no bar), if this process talks at all."""
        if not self.bar.disable:
            self.bar.write(message, file=sys.stderr)
        elif self.messages:
            print(message, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


class RunLog:
    """What a trainer's loop shows: metrics.jsonl + TensorBoard, with the rows logged after the
    resume point (`step`) dropped, and the progress bar (`bar`: shown at all); rank 0 (`main`)
    writes. `train_step`: the step of the last train row (the loop writes one for the last steps)."""

    def __init__(
        self, run_dir: Path, main: bool, step: int, *, bar: bool, max_steps: int | None, minutes: float | None
    ):
        self.metrics = MetricsLog(run_dir, main)
        self.metrics.truncate(step)
        self.progress = Progress(bar and main, step, max_steps, minutes, messages=main)
        self.train_step = step

    def row(self, kind: str, step: int, values: dict[str, Any]) -> None:
        """A row of metrics.jsonl (and TensorBoard scalars)."""
        self.metrics.log(kind, step, values)
        if kind == "train":
            self.train_step = step

    def result(self, kind: str, step: int, values: dict[str, float], spec: str = ".4g") -> None:
        """An evaluation's row, and one line above the bar: 'step N: name value, ...'."""
        self.row(kind, step, values)
        self.say(f"step {step}: " + ", ".join(f"{k} {v:{spec}}" for k, v in values.items()))

    def bar(self, step: int, **shown: Any) -> None:
        """The bar at `step`, with `shown` (formatted figures) after it."""
        self.progress.update(step, **shown)

    def say(self, message: str) -> None:
        """A line above the bar (or on stderr without one), on rank 0."""
        self.progress.write(message)

    def close(self) -> None:
        self.progress.close()
        self.metrics.close()
