"""`aiayn backtranslate` (aiayn.cli.backtranslate): a corpus prepare takes, and one-line
errors for bad input."""

from __future__ import annotations

from aiayn.cli import main


def test_bad_input_is_one_line(toy_model_dir, tmp_path, capsys):
    (tmp_path / "empty.es").write_text("\n\n")
    (tmp_path / "bad.es").write_bytes(b"uno\n\xff dos\n")
    for text, message in (
        ("empty.es", "no non-empty lines"),
        ("bad.es", "bad.es:2: invalid UTF-8"),
        ("no.es", "no.es"),
    ):
        code = main(
            [
                "backtranslate",
                str(toy_model_dir),
                str(tmp_path / text),
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and "\n" not in err
    assert main(["backtranslate", str(tmp_path), str(tmp_path / "bad.es"), "--out", str(tmp_path / "o")]) == 2
    assert "not a model directory" in capsys.readouterr().err


def test_the_command_line_writes_a_corpus_prepare_takes(toy_model_dir, monolingual_text, tmp_path, capsys):
    from aiayn.data.datadir import DataDir
    from aiayn.data.prepare import prepare
    from aiayn.data.recipe import load_recipe

    path, _ = monolingual_text
    assert (
        main(["backtranslate", str(toy_model_dir), str(path), "--out", str(tmp_path / "bt"), "--no-progress"])
        == 0
    )
    assert "back-translated" in capsys.readouterr().out
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "src_lang: en\ntgt_lang: es\nsources:\n  - {name: bt, src: bt/bt.en, tgt: bt/bt.es, weight: 2}\n"
    )
    data = prepare(tmp_path / "data", load_recipe(recipe), vocab_size=60, progress=False)
    assert DataDir(data).meta["sources"][0]["name"] == "bt"
