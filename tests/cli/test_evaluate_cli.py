"""`aiayn evaluate` on the toy model: a model on a data directory's split, or files; its mistakes one
line with nothing written."""

from __future__ import annotations

import json

import pytest
import sacrebleu

from aiayn.cli import main


def test_evaluate_bad_arguments_are_one_line_errors(toy_model_dir, toy_data_dir, tmp_path, capsys):
    """A --split that is a path (it would write outside --out), --limit 0 or below, nothing to score,
    and an --out that is a file: each one line, nothing written."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "afile").write_text("mine\n")
    model, data = str(toy_model_dir), str(toy_data_dir)
    out = ["--out", str(tmp_path / "ev"), "--no-progress"]
    for args in (
        [model, data, "--split", "../raw/test", *out],
        [model, data, "--limit", "0", *out],
        [model, data, "--limit", "-3", *out],
        ["--hyp", str(tmp_path / "empty.txt"), "--ref", str(tmp_path / "empty.txt")],
        [model, data, "--limit", "2", "--out", str(tmp_path / "afile"), "--no-progress"],
    ):
        assert main(["evaluate", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5 and all(line.startswith("aiayn evaluate: error: ") for line in err)
    assert "split: '../raw/test' is not a plain file name" in err[0]
    assert "got 0" in err[1] and "got -3" in err[2] and "nothing to score: 0 sentences" in err[3]
    assert "afile: a file is there, not a directory" in err[4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "empty.txt"]
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_evaluate_model_on_a_split(toy_model_dir, toy_data_dir, tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(
        [
            "evaluate",
            str(toy_model_dir),
            str(toy_data_dir),
            "--split",
            "test",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("BLEU|nrefs:1|") and printed[1].startswith("chrF2|nrefs:1|")
    scores = json.loads((out / "scores.json").read_text())
    hyps = (out / "test.hyp").read_text(encoding="utf-8").splitlines()
    refs = (toy_data_dir / "raw" / "test.tgt").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(refs) == scores["n_sentences"]
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-3)
    assert scores["bleu"] > 40  # the toy model has learnt its word-for-word task
    assert scores["decode"]["beam_size"] == 4


def test_evaluate_files(toy_data_dir, tmp_path, capsys):
    ref = toy_data_dir / "raw" / "test.tgt"
    assert main(["evaluate", "--hyp", str(ref), "--ref", str(ref), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "= 100.00" in printed.splitlines()[0]
    assert json.loads((tmp_path / "scores.json").read_text())["chrf"] == pytest.approx(100.0)
    assert main(["evaluate", "--hyp", str(ref)]) == 2
    assert main(["evaluate", "--hyp", str(ref), "--ref", str(tmp_path / "none.txt")]) == 2
    err = capsys.readouterr().err
    assert "either MODEL_DIR DATA_DIR" in err and "none.txt: no such file" in err
