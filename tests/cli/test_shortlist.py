"""`aiayn shortlist` (aiayn.cli.shortlist): the command builds the shortlist
build_shortlist builds, and translate --shortlist uses it."""

from __future__ import annotations

import shutil

import torch

from aiayn.cli import main
from aiayn.decode.shortlist import SHORTLIST_FILE, read_shortlist
from aiayn.decode.translator import Translator


def test_the_cli_builds_and_uses_it(shortlisted, tmp_path, capsys):
    model, data = shortlisted
    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    (copy / SHORTLIST_FILE).unlink()
    assert main(["shortlist", str(copy), str(data), "-k", "3", "-n", "2", "--no-progress"]) == 0
    assert "wrote" in capsys.readouterr().out
    built, expected = (
        read_shortlist(copy, Translator.load(copy).config),
        read_shortlist(model, Translator.load(model).config),
    )
    assert torch.equal(built.candidates, expected.candidates)
    (tmp_path / "in.txt").write_text("el gato come\n")
    out = tmp_path / "out.txt"
    assert main(["translate", str(copy), "--shortlist", "-i", str(tmp_path / "in.txt"), "-o", str(out)]) == 0
    assert out.read_text().strip()


def test_k_past_the_vocabulary_is_the_vocabulary(shortlisted, tmp_path, capsys):
    model, data = shortlisted
    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    assert (
        main(["shortlist", str(copy), str(data), "-k", "1000000000", "-n", "1000000000", "--no-progress"])
        == 0
    )
    built = read_shortlist(copy, Translator.load(copy).config)
    assert built.candidates.shape == (80, 80) and built.info["k"] == "80" and len(built.frequent) <= 80
