"""The checkpointer (aiayn.train.checkpointer): nothing to restore in a new run; a save restores the
loop state with the data position and seconds written into it, weights, optimizer, RNG and the
trainer's own entries; a checkpoint with one process's RNG state, as older ones were, resumes."""

import torch
from torch import nn

from aiayn.train import checkpoint
from aiayn.train.checkpointer import Checkpointer, LoopState
from aiayn.train.distributed import DistEnv

ONE = DistEnv(0, 1, torch.device("cpu"))


def trained(seed: int):
    """A linear model and an SGD optimizer with momentum after one step (from `seed`)."""
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).square().sum().backward()
    optimizer.step()
    return model, optimizer


def test_a_new_run_has_nothing_to_restore(tmp_path):
    model, optimizer = trained(0)
    keeper = Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2)
    assert keeper.restore() == (LoopState(), {})
    assert (keeper.path, keeper.step) == (None, -1)


def test_what_is_saved_comes_back(tmp_path, capsys):
    model, optimizer = trained(0)
    state = LoopState(step=7, tokens=70, best_dev_loss=2.5, bad_evals=1)
    path = Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2).save(state, (2, 3), 42.0, {"mine": 5})
    assert (state.epoch, state.index, state.seconds) == (2, 3, 42.0)
    expected = torch.rand(3)  # what the RNG draws next after the save

    other, other_optimizer = trained(1)
    keeper = Checkpointer(tmp_path, ONE, other, other_optimizer, keep_last=2)
    restored, saved = keeper.restore()
    assert restored == state and saved["mine"] == 5 and (keeper.path, keeper.step) == (path, 7)
    assert f"resuming from {path} (step 7)" in capsys.readouterr().out
    assert torch.equal(torch.rand(3), expected)
    for a, b in zip(model.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
        assert torch.equal(optimizer.state[a]["momentum_buffer"], other_optimizer.state[b]["momentum_buffer"])


def test_the_trainer_may_load_the_optimizer_its_own_way(tmp_path):
    model, optimizer = trained(0)
    Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2).save(LoopState(step=1), (0, 1), 1.0)
    loaded = []
    Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2).restore(loaded.append)
    assert [set(saved) for saved in loaded] == [{"state", "param_groups"}]


def test_only_the_last_checkpoints_are_kept(tmp_path):
    model, optimizer = trained(0)
    keeper = Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2)
    for step in (1, 2, 3):
        keeper.save(LoopState(step=step), (0, step), float(step))
    assert [path.name for path in checkpoint.list_checkpoints(tmp_path)] == ["step_000002", "step_000003"]


def test_one_processs_rng_state_as_older_checkpoints_kept_it(tmp_path):
    model, optimizer = trained(0)
    path = Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2).save(LoopState(step=4), (1, 0), 9.0)
    expected = torch.rand(2)
    saved = torch.load(path / checkpoint.STATE, weights_only=True)
    saved["rng"] = saved["rng"][0]
    del saved["world_size"]
    torch.save(saved, path / checkpoint.STATE)
    state, _ = Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2).restore()
    assert (state.step, state.epoch) == (4, 1) and torch.equal(torch.rand(2), expected)


def test_on_another_number_of_ranks_the_position_is_the_global_batch_reached(tmp_path, capsys):
    """Saved by 2 ranks at their batch 5 of epoch 1 (a share that began at global batch 3), restored on
    1: global batch 3 + 5 x 2 = 13 is where it deals from; the ranks' RNG states are not restored."""
    model, optimizer = trained(0)
    two = DistEnv(0, 2, torch.device("cpu"))
    keeper = Checkpointer(tmp_path, two, model, optimizer, keep_last=2)
    keeper.env = ONE  # rank 0 writes as it would with a second rank (all_gather aside)
    path = keeper.save(LoopState(step=9), (1, 5, 3), 1.0)
    saved = torch.load(path / checkpoint.STATE, weights_only=True)
    torch.save({**saved, "world_size": 2, "rng": saved["rng"] * 2}, path / checkpoint.STATE)
    torch.manual_seed(123)
    expected = torch.rand(2)
    torch.manual_seed(123)
    state, _ = Checkpointer(tmp_path, ONE, model, optimizer, keep_last=2).restore()
    assert (state.epoch, state.index, state.start) == (1, 0, 13)
    assert torch.equal(torch.rand(2), expected)  # this process's own RNG, not rank 0's saved one
