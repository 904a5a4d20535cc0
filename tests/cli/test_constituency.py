"""Parsing in `aiayn prepare` and `aiayn evaluate` (aiayn.cli.constituency): tree
files prepared, text options and bad arguments refused in one line."""

from __future__ import annotations

import pytest

from aiayn.cli import main
from aiayn.parse.grammar import synthetic_treebank


def test_cli_prepares_tree_files_and_rejects_text_options(tmp_path, capsys):
    trees = synthetic_treebank(5, {"train": 60, "valid": 0, "test": 0})["train"]
    files = {split: tmp_path / f"{split}.txt" for split in ("train", "valid", "test")}
    for i, path in enumerate(files.values()):
        path.write_text("".join(f"{t}\n" for t in trees[i * 20 : i * 20 + 20]))
    args = ["prepare", "--trees-train", str(files["train"]), "--trees-valid", str(files["valid"])]
    args += ["--trees-test", str(files["test"]), "--out", str(tmp_path / "d"), "--no-progress"]
    assert main(args) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{tmp_path / 'd'}: parse trees (user), train 20, valid 20, test 20 trees")
    assert main([*args[:-3], "--out", str(tmp_path / "e"), "--tgt", "x.txt"]) == 2
    assert "--tgt: for parallel text, not for trees" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("(S (NN a))\n(S (NN b)\n")
    assert main(["prepare", "--trees-train", str(bad), "--out", str(tmp_path / "f")]) == 2
    assert "bad.txt:2: the bracket opened here is never closed" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [(["--metric", "parseval", "--hyp", "h.tree"], "give either MODEL_DIR DATA_DIR, or --hyp F --ref F"),
     (["M", "D", "--baseline", "right-branching"], "--baseline takes DATA_DIR alone"),
     (["M", "--metric", "parseval"], "give MODEL_DIR DATA_DIR (or --hyp F --ref F)")],
)  # fmt: skip
def test_evaluate_s_parseval_arguments_are_one_line_errors(capsys, argv, message):
    assert main(["evaluate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
