"""The run directory (aiayn.train.run): config resolution and overrides, atomic config rewrites, and the
checks made before the first step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiayn.data.tokenizer import Tokenizer
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


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("config.yaml", "- another tool's\n- settings\n", r"config.yaml is not an aiayn config"),
        ("spm.model", "a tokenizer", r"spm.model exists outside a run directory"),
        ("run.json", '{"name": "another tool"}', r"run.json is not an aiayn run's"),
    ],
)
def test_training_never_overwrites_files_it_did_not_write(tmp_path, name, text, message):
    """--out into a directory holding another program's config.yaml, spm.model or run.json is refused
    before anything is written there; a run directory and an aiayn config.yaml of the user's are not."""
    data = write_data_dir(tmp_path / "data")
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text(text)
    with pytest.raises(AiaynError, match=message):
        train(data, out, tiny_config(max_steps=1), progress=False)
    assert [p.name for p in out.iterdir()] == [name] and (out / name).read_text() == text


def test_training_into_the_data_directory_is_refused(tmp_path):
    data = write_data_dir(tmp_path / "data")
    before = sorted(p.name for p in data.iterdir())
    with pytest.raises(AiaynError, match=r"data is the data directory; train into another --out"):
        train(data, data, tiny_config(max_steps=1), progress=False)
    assert sorted(p.name for p in data.iterdir()) == before


@pytest.mark.parametrize("out", ["notes.txt", "notes.txt/run"])
def test_training_into_a_file_is_refused(tmp_path, out):
    data = write_data_dir(tmp_path / "data")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(AiaynError, match=rf"^--out {tmp_path / out}: a file is there, not a directory$"):
        train(data, tmp_path / out, tiny_config(max_steps=1), progress=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_users_aiayn_config_in_the_run_directory_is_trained_and_resolved(tmp_path):
    data = write_data_dir(tmp_path / "data")
    (tmp_path / "run").mkdir()
    tiny_config(max_steps=1).to_yaml(tmp_path / "run" / "config.yaml")
    config = build_run_config(tmp_path / "run")  # the run directory's own config, as `aiayn train` reads it
    train(data, tmp_path / "run", config, progress=False)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["data_dir"] == str(data.resolve())
    saved = build_run_config(tmp_path / "run")  # rewritten: the user's settings, vocab_size resolved
    kept, given = saved.to_dict(), config.to_dict()
    assert kept["model"].pop("vocab_size") == Tokenizer.load(data / "spm.model").vocab_size
    given["model"].pop("vocab_size")
    assert kept == given
    train(data, tmp_path / "run", saved.replace(train=saved.train.replace(max_steps=2)), progress=False)
