"""The run directory (aiayn.train.run): config resolution and overrides, atomic config rewrites, and the
checks made before the first step."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.errors import AiaynError
from aiayn.train.run import build_run_config
from aiayn.train.trainer import train
from toy_translation import tiny_config, write_data_dir

CONFIGS = Path(__file__).parent.parent.parent / "configs"


def test_build_run_config_order_and_overrides(tmp_path):
    config = build_run_config(
        tmp_path, preset="tiny", overrides=["d_model=64", "warmup_steps=300"], max_steps=7
    )
    assert (config.model.d_model, config.model.n_layers, config.train.warmup_steps) == (64, 3, 300)
    assert (config.train.max_steps, config.train.seed) == (7, 1)
    assert build_run_config(tmp_path).model.d_model == 512  # the paper's base model by default
    config.to_yaml(tmp_path / "config.yaml")  # a run directory's own config wins over the default
    assert build_run_config(tmp_path, minutes=2.5, seed=3).model.d_model == 64
    assert build_run_config(tmp_path, config_file=CONFIGS / "big.yaml").model.d_model == 1024
    with pytest.raises(AiaynError, match="no such setting"):
        build_run_config(tmp_path, overrides=["d_moddel=3"])
    with pytest.raises(AiaynError, match="no such config file"):
        build_run_config(tmp_path, config_file=tmp_path / "missing.yaml")


def test_an_interrupted_config_rewrite_keeps_the_old_file(tmp_path, run_python):
    """config.yaml is rewritten at every start: a crash (here: a full disk) mid-write keeps the old one."""
    path = tmp_path / "config.yaml"
    tiny_config().to_yaml(path)
    before = path.read_text()
    printed = run_python(
        "from aiayn.config import RunConfig\nconfig = RunConfig()\nlimit_files(100)\n"
        f"try:\n    config.to_yaml({str(path)!r})\nexcept OSError as err:\n    print('failed', err.errno)\n"
    )
    assert printed.startswith("failed")
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["config.yaml"]


def test_an_empty_run_config_is_an_error_not_the_defaults(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("")
    with pytest.raises(AiaynError, match=r"config.yaml: expected a YAML mapping of settings, found NoneType"):
        build_run_config(tmp_path / "run")


def test_learned_positions_shorter_than_a_dev_pair_fail_at_the_start(tmp_path):
    """Not `eval_every` steps into the run, when the first dev batch overflows the position table."""
    from aiayn.data.dataset import ShardWriter, TokenDataset

    data = write_data_dir(tmp_path / "data")
    train_set = TokenDataset(data, "train")
    widest = int(max(train_set.src_lengths.max(), train_set.tgt_lengths.max()))
    writer = ShardWriter(data, "valid", 80)
    writer.add([[5] * (widest + 4)], [[6] * 3])  # one dev pair longer than any train pair
    writer.close()
    config = tiny_config(max_steps=2, eval_every=1)
    config = config.replace(model=config.model.replace(positions="learned", max_positions=widest))
    message = rf"valid split has pairs of up to {widest + 5} tokens but the model has max_positions={widest}"
    with pytest.raises(AiaynError, match=message):
        train(data, tmp_path / "run", config, progress=False)
    assert not (tmp_path / "run").exists()
