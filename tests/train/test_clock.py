"""The run clock (aiayn.train.clock): the whole run's seconds across resumes, pauses left out of the
log window's laps and of the budget timing once, the save clock, and the seconds each checkpoint
of a text run saves."""

import time

import pytest
import torch

from aiayn.train import eta
from aiayn.train.checkpoint import list_checkpoints
from aiayn.train.clock import RunClock
from aiayn.train.trainer import train
from toy_translation import tiny_config


@pytest.fixture
def now(monkeypatch):
    """time.monotonic() returns now[0]; the test moves it."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


def test_the_whole_run_counts_earlier_invocations_once(now):
    clock = RunClock(seconds_before=120.0, start_step=10, max_steps=None, minutes=None)
    now[0] += 30
    assert (clock.elapsed(), clock.seconds()) == (30.0, 150.0)
    now[0] += 5
    assert clock.seconds() == 155.0  # not 150 + 35: reading it changes nothing


def test_a_pause_is_left_out_of_the_lap(now):
    clock = RunClock(0.0, 0, None, None)
    now[0] += 10
    assert clock.lap() == 10.0
    now[0] += 3
    with clock.paused():
        now[0] += 50  # an evaluation
    now[0] += 4
    assert clock.lap() == 7.0 and clock.elapsed() == 67.0  # the run's clocks keep it


def test_a_pause_inside_the_timed_span_is_left_out_of_the_budget_timing(now):
    clock = RunClock(0.0, 0, max_steps=100, minutes=None, rate="img_s", unit="images")
    row = None
    for step in range(1, eta.SKIP + eta.SPAN + 1):
        now[0] += 2.0
        if step == eta.SKIP + 5:
            with clock.paused():
                now[0] += 50.0
        row = clock.eta.after_update(step, 32 * step)
    assert row == {"s_per_update": 2.0, "img_s": 16.0, "seconds_left": 2.0 * (100 - eta.SKIP - eta.SPAN)}


def test_the_save_clock_starts_with_the_run_and_again_at_each_save(now):
    clock = RunClock(0.0, 0, None, None)
    now[0] += 40
    assert clock.since_save() == 40.0
    clock.saved()
    now[0] += 15
    assert clock.since_save() == 15.0


def saved_seconds(run_dir):
    """The whole-run seconds each checkpoint of `run_dir` stored, oldest first."""
    return [
        torch.load(path / "trainer_state.pt", weights_only=True)["loop"]["seconds"]
        for path in list_checkpoints(run_dir)
    ]


def test_each_checkpoint_counts_the_run_once_across_resumes(data_dir, tmp_path, fake_clock):
    """In a text run, a fake clock advances 10 s at each update and stands still otherwise, so the
    whole run's time is exactly 10 s per update, however many checkpoints were written on the way
    (each save used to add the elapsed time once more)."""
    run = tmp_path / "run"
    train(data_dir, run, tiny_config(max_steps=4, save_every=1), progress=False)
    assert saved_seconds(run) == [10.0, 20.0, 30.0, 40.0]
    train(data_dir, run, tiny_config(max_steps=6, save_every=1), progress=False)  # a resume
    assert saved_seconds(run)[-2:] == [50.0, 60.0]
