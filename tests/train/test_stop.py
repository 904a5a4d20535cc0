"""The stop rules (aiayn.train.stop): budgets before an update; early stopping; after an update a
signal, the time budget and the save clock, agreed on by all ranks."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from aiayn.train.checkpointer import LoopState
from aiayn.train.distributed import DistEnv
from aiayn.train.stop import StopRules

ROOT = Path(__file__).parent.parent.parent
ONE = DistEnv(0, 1, torch.device("cpu"))


class Clock:
    """Stands in for RunClock: fixed readings."""

    def __init__(self, elapsed=0.0, since_save=0.0):
        self._elapsed, self._since_save = elapsed, since_save

    def elapsed(self):
        return self._elapsed

    def since_save(self):
        return self._since_save


def rules(received=None, **settings):
    return StopRules(ONE, SimpleNamespace(received=received), **settings)


def test_the_step_and_epoch_budgets_end_the_run_before_an_update():
    assert rules().before_update(10**6, 10**6) is None
    assert rules(max_steps=5).before_update(4, 0) is None
    assert rules(max_steps=5).before_update(5, 0) == "max_steps"
    assert rules(max_epochs=2).before_update(3, 1) is None
    assert rules(max_epochs=2, max_steps=9).before_update(3, 2) == "max_epochs"


def test_early_stopping_counts_evaluations_since_the_best():
    state, stop = LoopState(), rules(patience=2)
    reasons = [stop.early_stop(state, loss) for loss in (3.0, 2.5, 2.7, 2.5)]
    assert reasons == [None, None, None, "early_stop"]  # equal to the best is no better
    assert (state.best_dev_loss, state.bad_evals) == (2.5, 2)
    assert rules().early_stop(LoopState(), 1.0) is None  # no patience: never


def test_after_an_update_a_signal_overrides_and_the_time_budget_comes_last():
    clock = Clock(elapsed=61.0, since_save=0.0)
    assert rules().after_update(clock) == (None, False)
    assert rules(minutes=1.0).after_update(clock) == ("minutes", False)
    assert rules(minutes=1.0).after_update(clock, "early_stop") == ("early_stop", False)
    assert rules("SIGINT", minutes=1.0).after_update(clock, "early_stop") == ("signal:SIGINT", False)
    assert rules(minutes=2.0).after_update(clock) == (None, False)


def test_a_checkpoint_is_due_by_time_only_when_the_run_goes_on():
    clock = Clock(elapsed=100.0, since_save=30.0)
    assert rules(save_minutes=0.5).after_update(clock) == (None, True)
    assert rules(save_minutes=1.0).after_update(clock) == (None, False)
    assert rules(save_minutes=None).after_update(clock) == (None, False)
    assert rules("SIGTERM", save_minutes=0.5).after_update(clock) == ("signal:SIGTERM", False)
    assert rules(save_minutes=0.5).after_update(clock, "early_stop") == ("early_stop", False)


def test_the_signal_is_read_once_per_update():
    """Once to decide, once more for its name when it stops the run (StopSignals is a flag)."""
    reads = []

    class Counting:
        @property
        def received(self):
            reads.append(1)
            return None

    StopRules(ONE, Counting()).after_update(Clock())
    assert len(reads) == 1


AGREE = """
import pathlib, sys
from types import SimpleNamespace
from aiayn.train import distributed
from aiayn.train.stop import StopRules

class Clock:
    def __init__(self, elapsed, since_save):
        self.elapsed, self.since_save = lambda: elapsed, lambda: since_save

env = distributed.setup("cpu")
signal = "SIGTERM" if env.rank == 1 else None
rules = StopRules(env, SimpleNamespace(received=signal), minutes=1.0, save_minutes=1.0)
answers = [rules.after_update(Clock(0.0, 0.0)), StopRules(env, SimpleNamespace(received=None),
    minutes=1.0, save_minutes=1.0).after_update(Clock(0.0, 90.0 if env.rank == 0 else 0.0))]
pathlib.Path(sys.argv[1], f"rank{env.rank}.txt").write_text(repr(answers))
distributed.teardown(env)
"""


@pytest.mark.slow
def test_ranks_agree_on_a_signal_and_a_save_only_one_of_them_sees(tmp_path):
    (tmp_path / "agree.py").write_text(AGREE)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    done = subprocess.run(
        [*command, str(tmp_path / "agree.py"), str(tmp_path)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert answers == [
        "[('signal:peer', False), (None, True)]",
        "[('signal:SIGTERM', False), (None, True)]",
    ]
