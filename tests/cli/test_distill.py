"""`aiayn distill` (aiayn.cli.distill): a student trained on the command line, and what
the user put at OUT refused and kept."""

from __future__ import annotations

import json
import shutil

import pytest

from aiayn.cli import main
from aiayn.data.datadir import DataDir
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from toy_translation import write_toy_data_dir


@pytest.fixture(scope="module")
def toy_data(toy_model_dir, tmp_path_factory):
    """60 training pairs of the toy task in the toy translator's vocabulary."""
    root = tmp_path_factory.mktemp("distill")
    return write_toy_data_dir(root / "data", toy_model_dir / "spm.model", n_train=60, n_test=10)


def test_what_the_user_put_at_out_data_is_refused_and_kept(toy_model_dir, toy_data, tmp_path, capsys):
    mine, victim, parts = tmp_path / "mine" / "data", tmp_path / "victim", tmp_path / "parts" / "data.parts"
    for directory in (mine, victim, parts):
        directory.mkdir(parents=True)
        (directory / "precious.txt").write_text("mine")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "data").symlink_to(victim)
    cases = {
        "mine": f"{mine} exists and is not distill's data directory",
        "linked": f"{tmp_path / 'linked' / 'data'} is a link",
        "parts": f"{parts / 'precious.txt'} is not distill's",
    }
    for out, message in cases.items():
        argv = ["distill", str(toy_model_dir), str(toy_data), "--out", str(tmp_path / out), "--steps", "1"]
        assert main([*argv, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    for directory in (mine, victim, parts):
        assert [p.name for p in directory.iterdir()] == ["precious.txt"]


def test_distill_on_the_command_line_trains_a_student(toy_model_dir, toy_data, tmp_path, capsys):
    out = tmp_path / "out"
    tiny = ["--set", "d_model=32", "--set", "d_ff=64", "--set", "n_heads=2", "--set", "n_layers=2"]
    argv = ["distill", str(toy_model_dir), str(toy_data), "--out", str(out), "--beam", "2", "--steps", "4"]
    argv += [*tiny, "--set", "max_tokens=200", "--set", "update_tokens=200", "--set", "save_every=2"]
    assert main([*argv, "--chunk", "32", "--no-progress"]) == 0
    assert f"student: {out / 'model'}" in capsys.readouterr().out
    student = Translator.load(out / "model", device="cpu")
    assert (student.config.n_layers, student.config.decoder_layers) == (2, 1)
    assert isinstance(translate_texts(student, ["el gato"])[0], str)
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["distilled"] == DataDir(out / "data").meta["distilled"]  # what it was trained on
    shutil.rmtree(out / "data" / "raw")  # a finished OUT/data and OUT/model are reused, not redone
    assert main([*argv, "--no-progress"]) == 0
    assert main([*argv, "--set", "d_model=64", "--no-progress"]) == 2
    assert f"{out / 'model'} is another model (d_model 32, not 64" in capsys.readouterr().err
    config["distilled"]["teachers"] = ["/elsewhere/model"]
    (out / "model" / "config.json").write_text(json.dumps(config))
    assert main([*argv, "--no-progress"]) == 2
    assert "was not trained on this distillation" in capsys.readouterr().err
