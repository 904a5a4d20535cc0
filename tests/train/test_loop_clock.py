"""The run clock (aiayn.train.clock) in a text run: whole-run seconds, saved at every checkpoint,
counted once.

A fake clock advances 10 s at each update and stands still otherwise, so the whole run's time is
exactly 10 s per update, however many checkpoints were written on the way (issue 38, item 16: each
save used to add the elapsed time once more).
"""

import torch

from aiayn.train.checkpoint import list_checkpoints
from aiayn.train.trainer import train
from toy_translation import tiny_config


def saved_seconds(run_dir):
    """The whole-run seconds each checkpoint of `run_dir` stored, oldest first."""
    return [
        torch.load(path / "trainer_state.pt", weights_only=True)["loop"]["seconds"]
        for path in list_checkpoints(run_dir)
    ]


def test_each_checkpoint_counts_the_run_once_across_resumes(data_dir, tmp_path, fake_clock):
    run = tmp_path / "run"
    train(data_dir, run, tiny_config(max_steps=4, save_every=1), progress=False)
    assert saved_seconds(run) == [10.0, 20.0, 30.0, 40.0]
    train(data_dir, run, tiny_config(max_steps=6, save_every=1), progress=False)  # a resume
    assert saved_seconds(run)[-2:] == [50.0, 60.0]
