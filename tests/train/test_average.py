"""`aiayn average` (aiayn.train.checkpoint.average_run): the model directory is swapped whole, and
what a run's files say is checked before anything is allocated."""

import json

import pytest
import yaml

from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import AiaynError
from aiayn.model import io as model_io
from aiayn.model.io import load_model_dir
from aiayn.train.checkpoint import average_run
from aiayn.train.trainer import train
from toy_translation import REVERSED_LANGUAGE, tiny_config, word_for_word


@pytest.fixture
def run(data_dir, tmp_path):
    train(data_dir, tmp_path / "run", tiny_config(max_steps=2, save_every=1), progress=False)
    return tmp_path / "run"


def test_a_failed_average_leaves_the_old_model_and_keeps_what_else_is_there(run, monkeypatch):
    out = average_run(run, last=1)
    (out / "eval").mkdir()
    (out / "eval" / "scores.json").write_text("{}")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # as a kill between the weights and config.json would

    monkeypatch.setattr(model_io, "write_config", killed)
    with pytest.raises(KeyboardInterrupt):
        average_run(run, last=2)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []
    monkeypatch.undo()
    average_run(run, last=2)
    assert json.loads((out / "config.json").read_text())["averaged"] == ["step_000001", "step_000002"]
    assert (out / "eval" / "scores.json").read_text() == "{}"
    load_model_dir(out)


def test_a_run_config_is_checked_against_the_weights_before_allocating(run):
    path = run / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"]["d_model"] = 64
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(AiaynError, match=r"config.yaml and .*model.safetensors: weights do not match"):
        average_run(run)
    config["model"]["d_model"], config["model"]["vocab_size"] = 32, 10**10
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(AiaynError, match=r"weights do not match config.json \(vocab_size=10000000000\)"):
        average_run(run)


def test_run_json_values_are_checked_as_config_values(run):
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "src_lang": ["es"]}))
    with pytest.raises(AiaynError, match=r"run.json: src_lang must be a str, got \['es'\]"):
        average_run(run)


def test_the_longest_training_source_reaches_the_model_directory(run, data_dir):
    """run.json and the averaged model's config.json record the most source tokens
    (EOS included) of a training pair, counted here from the pairs themselves."""
    pairs = word_for_word(240, 1, REVERSED_LANGUAGE, (2, 9), reverse=True)  # write_data_dir's train split
    tokenizer = Tokenizer.load(data_dir / "spm.model")
    longest = max(len(ids) + 1 for ids in tokenizer.encode([src for src, _ in pairs]))
    assert json.loads((run / "run.json").read_text())["longest_source"] == longest
    out = average_run(run, last=1)
    assert json.loads((out / "config.json").read_text())["longest_source"] == longest
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "longest_source": "12"}))
    with pytest.raises(AiaynError, match=r"run.json: longest_source must be a int, got '12'"):
        average_run(run)
