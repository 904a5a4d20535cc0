"""`aiayn prepare` on the command line: the summary line, one-line errors, the choice of corpus."""

from __future__ import annotations

import json

from aiayn.cli import main


def test_cli_refuses_a_corpus_and_files_together(tmp_path, write_corpus, capsys):
    valid_src = str(write_corpus(20, names=("valid.es", "valid.en"))[0])
    assert main(["prepare", "--corpus", "bible-es-en", "--valid-src", valid_src, "--out", str(tmp_path)]) == 2
    assert "give exactly one corpus" in capsys.readouterr().err


def test_cli_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "a.es").write_text("uno\ndos\n")
    (tmp_path / "a.en").write_text("one\n")
    code = main(
        [
            "prepare",
            "--src",
            str(tmp_path / "a.es"),
            "--tgt",
            str(tmp_path / "a.en"),
            "--out",
            str(tmp_path / "d"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert err.startswith("aiayn prepare: error: ") and "a.es has 2 lines but" in err and "a.en has 1" in err


def test_cli_prepares_and_summarises(tmp_path, write_corpus, capsys):
    src, tgt = write_corpus(300)
    argv = [
        "prepare",
        "--src",
        str(src),
        "--tgt",
        str(tgt),
        "--out",
        str(tmp_path / "d"),
        "--vocab-size",
        "100",
    ]
    assert main([*argv, "--no-progress", "--src-lang", "xx"]) == 0
    out = capsys.readouterr().out
    assert "xx->en" in out and "train 288" in out
    assert json.loads((tmp_path / "d" / "meta.json").read_text())["src_lang"] == "xx"


def test_cli_reuses_a_vocabulary_with_a_train_limit(tmp_path, write_corpus, capsys):
    src, tgt = write_corpus(300)
    first = tmp_path / "first"
    assert (
        main(["prepare", "--src", str(src), "--tgt", str(tgt), "--out", str(first), "--vocab-size", "100"])
        == 0
    )
    argv = ["prepare", "--src", str(src), "--tgt", str(tgt), "--out", str(tmp_path / "d")]
    assert main([*argv, "--spm", str(first), "--train-limit", "50", "--no-progress"]) == 0
    assert "train 50," in capsys.readouterr().out
    assert (tmp_path / "d" / "spm.model").read_bytes() == (first / "spm.model").read_bytes()
    assert main([*argv, "--spm", str(first), "--vocab-size", "50", "--force"]) == 2
    assert "--vocab-size asks for 50" in capsys.readouterr().err


def test_cli_recipe_and_clean(tmp_path, write_corpus, capsys):
    src, tgt = write_corpus(200, seed=3)
    with open(src, "a") as s, open(tgt, "a") as t:
        s.write("a line said twice over\na line said twice over\n")
        t.write("one line said twice\none line said twice\n")
    code = main(
        ["prepare", "--src", str(src), "--tgt", str(tgt), "--out", str(tmp_path / "d"), "--vocab-size", "100"]
        + ["--clean", "--src-lang", "en", "--tgt-lang", "en", "--no-progress"]
    )
    assert code == 0
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["clean"]["rules"] == ["duplicates", "near_duplicates", "copies", "language"]
    assert meta["dropped"]["train"]["duplicates"] == 1 and meta["sources"][0]["name"] == "user"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"sources:\n  - {{src: {src}, tgt: {tgt}, weight: 2}}\n")
    assert (
        main(["prepare", "--recipe", str(recipe), "--out", str(tmp_path / "r"), "--vocab-size", "100"]) == 0
    )
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["sources"][0]["weight"] == 2.0
    capsys.readouterr()
    code = main(["prepare", "--recipe", str(recipe), "--tgt", str(tgt), "--out", str(tmp_path / "x")])
    assert code == 2 and "--tgt belongs in the recipe" in capsys.readouterr().err


def test_cli_score_rule(tmp_path, toy_model_dir, toy_reverse_model_dir, capsys):
    from toy import word_for_word, write_parallel

    pairs = word_for_word(200, 3, lengths=(3, 6))
    src, tgt = write_parallel(pairs, tmp_path / "c.es", tmp_path / "c.en")
    argv = ["prepare", "--src", str(src), "--tgt", str(tgt), "--vocab-size", "60", "--no-progress"]
    models = ["--score-models", str(toy_model_dir), str(toy_reverse_model_dir)]
    assert main([*argv, "--out", str(tmp_path / "d"), *models, "--score-drop", "0.05"]) == 0
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["clean"]["rules"] == ["score"] and meta["clean"]["score"]["drop"] == 0.05
    scored = meta["pairs"]["train"] + meta["dropped"]["train"]["score"]
    assert meta["dropped"]["train"]["score"] == round(0.05 * scored)
    capsys.readouterr()
    for extra, message in [
        (["--score-drop", "0.1"], "--score-drop needs --score-models FORWARD REVERSE"),
        ([*models, "--score-drop", "1.5"], "drop must be a share between 0 and 1 (exclusive), got 1.5"),
    ]:
        assert main([*argv, "--out", str(tmp_path / "x"), "--clean", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and message in err and not (tmp_path / "x").exists()
