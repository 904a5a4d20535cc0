"""The shared parts of a training loop (aiayn.train: checkpointer, clock, stop, metrics) in a stand-in
trainer's loop built as the trainers' are: the stop rules, when rows are logged and checkpoints
written, and exact resume of the loop state, weights, optimizer, data position and RNG (the budget
clock is not tested here)."""

import json

import pytest
import torch
from torch import nn

from aiayn.errors import AiaynError
from aiayn.train import checkpoint
from aiayn.train.checkpointer import Checkpointer
from aiayn.train.clock import RunClock
from aiayn.train.distributed import DistEnv
from aiayn.train.metrics import RunLog
from aiayn.train.signals import StopSignals
from aiayn.train.stop import StopRules

BATCHES_PER_EPOCH = 4


class Stream:
    """A data position (epoch, index) that moves one batch per update, as aiayn.data.BatchStream."""

    def __init__(self, epoch: int, index: int):
        self.position = (epoch, index)

    def next(self) -> torch.Tensor:
        epoch, index = self.position
        self.position = (epoch + 1, 0) if index + 1 == BATCHES_PER_EPOCH else (epoch, index + 1)
        return torch.full((2, 3), float(epoch * BATCHES_PER_EPOCH + index + 1))  # (batch, features)


class StandIn:
    """A linear model trained by SGD with momentum on the stream's batches plus RNG noise (as dropout
    would draw), with scripted events: evaluations that stop the run, skipped updates, a signal."""

    def __init__(self, run_dir, max_steps, *, log_every=2, keep_last=5, save_every=None, world_size=1):
        self.run_dir, self.max_steps, self.save_every, self.log_every = (
            run_dir,
            max_steps,
            save_every,
            log_every,
        )
        self.env = DistEnv(0, world_size, torch.device("cpu"))
        self.model = nn.Linear(3, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.stop_at, self.skip_at, self.signal_at = set(), set(), None
        self.signals = StopSignals()
        self.logged, self.evaluated = [], []
        self.checkpoints = Checkpointer(run_dir, self.env, self.model, self.optimizer, keep_last)
        self.state, _ = self.checkpoints.restore()
        self.start_step = self.state.step
        self.stream = Stream(self.state.epoch, self.state.index)

    def run(self) -> str:
        state = self.state
        self.clock = RunClock(state.seconds, self.start_step, self.max_steps, None)
        self.log = RunLog(self.run_dir, True, state.step, bar=False, max_steps=self.max_steps, minutes=None)
        rules = StopRules(self.env, self.signals, max_steps=self.max_steps)
        try:
            while (reason := rules.before_update(state.step, state.epoch)) is None:
                if not self._update():
                    continue
                if state.step % self.log_every == 0:
                    self._log_train()
                if state.step in self.stop_at:
                    reason = self._evaluate()
                reason, save_due = rules.after_update(self.clock, reason)
                if reason is not None:
                    break
                if save_due or (self.save_every is not None and state.step % self.save_every == 0):
                    self._save()
            if state.step > self.log.train_step:
                self._log_train()
            if self.checkpoints.step != state.step:
                self._save()
            return reason
        finally:
            self.log.close()

    def _update(self) -> bool:
        x = self.stream.next()
        if self.state.step + 1 in self.skip_at:
            self.skip_at.discard(self.state.step + 1)
            self.state.nonfinite += 1
            return False
        loss = (self.model(x + torch.rand_like(x)) ** 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.state.step += 1
        self.state.tokens += x.numel()
        if self.state.step == self.signal_at:
            self.signals.received = "SIGTERM"
        return True

    def _log_train(self):
        self.logged.append(self.state.step)
        self.log.row("train", self.state.step, {"tokens": self.state.tokens})

    def _evaluate(self):
        self.evaluated.append(self.state.step)
        return "early_stop"

    def _save(self):
        self.checkpoints.save(self.state, self.stream.position, self.clock.seconds())
        self.clock.saved()


def steps_of(run_dir):
    return [int(path.name.split("_")[1]) for path in checkpoint.list_checkpoints(run_dir)]


def train_rows(run_dir):
    rows = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [row["step"] for row in rows if row["kind"] == "train"]


def test_the_budget_ends_the_run_rows_every_log_every_and_one_for_the_last_steps(tmp_path):
    loop = StandIn(tmp_path, max_steps=5, log_every=2)
    assert loop.run() == "max_steps"
    assert loop.logged == [2, 4, 5] and train_rows(tmp_path) == [2, 4, 5]
    assert steps_of(tmp_path) == [5]  # the final checkpoint only
    assert (loop.state.step, loop.state.tokens) == (5, 30)


def test_checkpoints_due_by_step_keep_only_the_newest(tmp_path):
    loop = StandIn(tmp_path, max_steps=7, save_every=2, keep_last=2)
    loop.run()
    assert steps_of(tmp_path) == [6, 7]


def test_an_early_stop_ends_the_run_at_once_with_a_checkpoint(tmp_path):
    loop = StandIn(tmp_path, max_steps=10, log_every=2)
    loop.stop_at = {3, 6}
    assert loop.run() == "early_stop"
    assert loop.evaluated == [3] and loop.state.step == 3
    assert loop.logged == [2, 3] and steps_of(tmp_path) == [3]


def test_a_signal_stops_after_its_update_and_saves(tmp_path):
    loop = StandIn(tmp_path, max_steps=10)
    loop.signal_at = 4
    assert loop.run() == "signal:SIGTERM"
    assert steps_of(tmp_path) == [4]


def test_a_skipped_update_is_not_counted_logged_or_evaluated(tmp_path):
    loop = StandIn(tmp_path, max_steps=3, log_every=1)
    loop.skip_at, loop.stop_at = {2}, {7}
    loop.run()
    assert loop.logged == [1, 2, 3] and loop.state.nonfinite == 1
    assert loop.stream.position == (1, 0)  # four batches: the skipped one was consumed


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path):
    torch.manual_seed(0)
    straight = StandIn(tmp_path / "a", max_steps=6)
    straight.run()
    torch.manual_seed(0)
    StandIn(tmp_path / "b", max_steps=3).run()
    torch.manual_seed(1)  # the RNG state must come from the checkpoint
    resumed = StandIn(tmp_path / "b", max_steps=6)
    assert (resumed.start_step, resumed.state.step, resumed.state.tokens) == (3, 3, 18)
    assert resumed.stream.position == (0, 3)
    resumed.run()
    assert resumed.stream.position == straight.stream.position == (1, 2)
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)  # the RNG noise and the momentum came back too
    assert train_rows(tmp_path / "a") == [2, 4, 6]
    assert train_rows(tmp_path / "b") == [2, 3, 4, 6]  # and the row of the first run's last step


def test_a_resume_drops_the_rows_logged_after_its_checkpoint(tmp_path):
    StandIn(tmp_path, max_steps=5, log_every=1, save_every=3).run()
    checkpoint_5 = checkpoint.list_checkpoints(tmp_path)[-1]
    for path in checkpoint_5.iterdir():  # as if killed before step 5's checkpoint was written
        path.unlink()
    checkpoint_5.rmdir()
    loop = StandIn(tmp_path, max_steps=6, log_every=1)
    assert loop.start_step == 3
    loop.run()
    assert train_rows(tmp_path) == [1, 2, 3, 4, 5, 6]


def test_another_world_size_deals_from_the_global_batch_reached(tmp_path):
    StandIn(tmp_path, max_steps=3).run()  # one rank, batch 3 of epoch 0 next
    two_ranks = StandIn(tmp_path, max_steps=6, world_size=2)
    state = two_ranks.state
    assert (state.epoch, state.index, state.start) == (0, 0, 3)  # the two ranks deal from global batch 3


def test_a_checkpoint_of_another_state_version_is_refused(tmp_path):
    StandIn(tmp_path, max_steps=1).run()
    path = checkpoint.list_checkpoints(tmp_path)[-1] / checkpoint.STATE
    state = torch.load(path, weights_only=True)
    torch.save({**state, "version": 0}, path)
    with pytest.raises(AiaynError, match="trainer state version 0 is not 1"):
        StandIn(tmp_path, max_steps=2)
