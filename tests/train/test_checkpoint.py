"""Checkpoint files: safetensors + a weights_only trainer state, atomic publication, keep-last-K, RNG."""

import random
import re

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import ModelConfig, RunConfig
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer
from aiayn.train.checkpoint import (
    average_run,
    average_weights,
    list_checkpoints,
    load_checkpoint,
    remove_partial,
    rng_state,
    save_checkpoint,
    set_rng_state,
)


def small_model(seed=0):
    torch.manual_seed(seed)
    return Transformer(ModelConfig(vocab_size=30, d_model=16, d_ff=32, n_heads=2, n_layers=1))


def test_save_load_round_trip_with_weights_only_state(tmp_path):
    model = small_model()
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
    model(torch.tensor([[5, 6, 3]]), torch.tensor([[2, 7]])).sum().backward()
    optimizer.step()
    state = {
        "loop": {"step": 7, "best_dev_loss": None},
        "optimizer": optimizer.state_dict(),
        "rng": [rng_state()],
    }
    path = save_checkpoint(tmp_path, 7, model, state, keep_last=3)
    assert path == tmp_path / "checkpoints" / "step_000007"
    torch.load(path / "trainer_state.pt", weights_only=True)  # no pickle of arbitrary objects

    other = small_model(seed=1)
    loaded = load_checkpoint(path, other)
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), other.state_dict().values(), strict=True)
    )
    assert loaded["loop"] == {"step": 7, "best_dev_loss": None}
    fresh = torch.optim.Adam(other.parameters())
    fresh.load_state_dict(loaded["optimizer"])
    assert fresh.param_groups[0]["betas"] == (0.9, 0.98)
    # tied matrices are stored once
    assert len(load_file(str(path / "model.safetensors"))) < len(model.state_dict())


def test_keep_last_and_partial_directories(tmp_path):
    model = small_model()
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, step, model, {"step": step}, keep_last=2)
    partial = tmp_path / "checkpoints" / ".tmp-step_000005"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half a file")
    (tmp_path / "checkpoints" / "step_000009").mkdir()  # no files: never listed
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000003", "step_000004"]
    assert remove_partial(tmp_path) == [partial] and not partial.exists()


def test_load_reports_a_damaged_checkpoint(tmp_path):
    path = save_checkpoint(tmp_path, 1, small_model(), {"step": 1}, keep_last=1)
    (path / "trainer_state.pt").write_bytes(b"")  # a truncated state: the file and the way out
    with pytest.raises(
        AiaynError,
        match=rf"^{path}/trainer_state.pt: cannot load checkpoint \(.*\); if damaged, remove {path} to use",
    ):
        load_checkpoint(path, small_model())
    (path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(AiaynError, match=rf"^{path}/model.safetensors: cannot load checkpoint"):
        load_checkpoint(path, small_model())


def test_rng_state_round_trip():
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    saved = rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(saved)
    assert (random.random(), np.random.rand()) == expected[:2] and torch.equal(torch.rand(1), expected[2])


@pytest.mark.parametrize("damage", ["garbage", "other shapes"])
def test_a_damaged_checkpoint_to_average_is_named_in_one_line(tmp_path, damage):
    paths = [save_checkpoint(tmp_path / "run", i, small_model(i), {}, keep_last=5) for i in (1, 2)]
    weights = paths[1] / "model.safetensors"
    if damage == "garbage":
        weights.write_bytes(b"not a safetensors file")
    else:
        other = Transformer(ModelConfig(vocab_size=40, d_model=16, d_ff=32, n_heads=2, n_layers=1))
        other_dir = save_checkpoint(tmp_path / "other", 1, other, {}, keep_last=5)
        weights.write_bytes((other_dir / "model.safetensors").read_bytes())
    where = re.escape(str(weights))
    with pytest.raises(AiaynError, match=rf"^{where}: cannot average this checkpoint: \S") as err:
        average_weights(paths, small_model(seed=4))
    assert "\n" not in str(err.value)


def test_average_weights_is_the_float64_mean(tmp_path):
    models = [small_model(seed) for seed in (1, 2, 3)]
    paths = [save_checkpoint(tmp_path, i, m, {}, keep_last=5) for i, m in enumerate(models, 1)]
    averaged = average_weights(paths, small_model(seed=4))
    for name, tensor in averaged.named_parameters():
        expected = sum(dict(m.named_parameters())[name].detach().double() for m in models) / 3
        torch.testing.assert_close(tensor.detach().double(), expected, rtol=0, atol=1e-7)
    assert averaged.output_weight is averaged.tgt_embed.weight is averaged.src_embed.weight  # still tied


def test_average_writes_only_into_a_model_directory(tmp_path):
    """`aiayn average --out` replaces model files: an existing directory that is not an aiayn model
    directory (an export, notes) is refused and left as it was; the run's own model/ is replaced."""
    run = tmp_path / "run"
    config = RunConfig(model=small_model().config)
    for step in (1, 2):
        save_checkpoint(run, step, small_model(step), {}, keep_last=5)
    config.to_yaml(run / "config.yaml")
    other = tmp_path / "hf"
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "marian"}')
    with pytest.raises(
        AiaynError, match=rf"^{re.escape(str(other))} exists and is not an aiayn model directory"
    ):
        average_run(run, out_dir=other)
    assert [p.name for p in other.iterdir()] == ["config.json"]
    assert average_run(run) == run / "model" and average_run(run) == run / "model"  # written, then replaced
