"""Many target languages from the command line: a tagged recipe's languages reach the model
directory through train and average, `aiayn translate --to`, and each mistake is one line."""

from __future__ import annotations

import json

import pytest

from aiayn.cli import main
from aiayn.decode.bundle import load_bundle
from aiayn.train.checkpoint import average_run
from aiayn.train.trainer import train
from toy import LEXICON, LEXICON_DE, word_for_word
from toy_translation import tiny_config, write_parallel

TEXTS = [s for s, _ in word_for_word(12, seed=21)]


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _write_recipe(tmp_path) -> None:
    for name, lexicon in (("de", LEXICON_DE), ("en", LEXICON)):
        write_parallel(word_for_word(150, 3, lexicon), tmp_path / f"{name}.es", tmp_path / f"{name}.{name}")
    (tmp_path / "multi.yaml").write_text(
        "src_lang: es\ntags: true\nsources:\n  - {src: de.es, tgt: de.de, tgt_lang: de}\n"
        "  - {src: en.es, tgt: en.en, tgt_lang: en}\n"
    )


def test_the_model_directory_records_its_languages_after_train_and_average(tmp_path, capsys):
    _write_recipe(tmp_path)
    data = tmp_path / "data"
    assert main(["prepare", "--recipe", str(tmp_path / "multi.yaml"), "--out", str(data),
                 "--vocab-size", "90", "--no-progress"]) == 0  # fmt: skip
    train(data, tmp_path / "run", tiny_config(max_steps=2, save_every=1), progress=False)
    run_info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (run_info["target_languages"], run_info["target_tag"]) == (["de", "en"], ">>{lang}<<")
    assert main(["average", str(tmp_path / "run")]) == 0
    config = json.loads((tmp_path / "run" / "model" / "config.json").read_text())
    assert (config["src_lang"], config["tgt_lang"]) == ("es", "mul")
    assert (config["target_languages"], config["target_tag"]) == (["de", "en"], ">>{lang}<<")
    assert load_bundle(tmp_path / "run" / "model", "cpu").target_languages == ["de", "en"]
    out = average_run(tmp_path / "run", last=1, out_dir=tmp_path / "other")  # any --out records them
    assert json.loads((out / "config.json").read_text())["target_languages"] == ["de", "en"]
    # the model's own vocabulary has the tags: a new data directory may reuse it
    spm = tmp_path / "run" / "model" / "spm.model"
    assert main(["prepare", "--recipe", str(tmp_path / "multi.yaml"), "--out", str(tmp_path / "again"),
                 "--spm", str(spm), "--no-progress"]) == 0  # fmt: skip


def test_a_reused_vocabulary_without_the_tags_is_refused(tmp_path, toy_model_dir, capsys):
    _write_recipe(tmp_path)
    out = tmp_path / "data"
    assert main(["prepare", "--recipe", str(tmp_path / "multi.yaml"), "--out", str(out),
                 "--spm", str(toy_model_dir / "spm.model"), "--no-progress"]) == 2  # fmt: skip
    assert "has no piece for the target-language tag(s) >>de<<, >>en<< (tags: true)" in _one_error(capsys)
    assert not out.exists() and not list(tmp_path.glob(".data*"))


def test_translate_to_a_language(toy_multilingual_model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    outputs = {}
    for language in ("de", "en"):
        out = tmp_path / f"out.{language}"
        args = ["translate", str(toy_multilingual_model_dir), "-i", str(tmp_path / "in.txt"), "-o", str(out)]
        assert main([*args, "--to", language, "--beam", "2", "--device", "cpu"]) == 0
        outputs[language] = out.read_text(encoding="utf-8").splitlines()
    for language, lexicon in (("de", LEXICON_DE), ("en", LEXICON)):
        words = [w for line in outputs[language] for w in line.split()]
        assert len(outputs[language]) == len(TEXTS)
        assert sum(w in lexicon.values() for w in words) / len(words) > 0.95
    (tmp_path / "doc.txt").write_text("\n\n".join(TEXTS[:4]) + "\n", encoding="utf-8")  # 4 paragraphs
    document = tmp_path / "doc.de"
    assert main(["translate", str(toy_multilingual_model_dir), "-i", str(tmp_path / "doc.txt"), "-o",
                 str(document), "--document", "--to", "de", "--beam", "2"]) == 0  # fmt: skip
    assert document.read_text(encoding="utf-8").split("\n\n") == [
        line + ("\n" if i == 3 else "") for i, line in enumerate(outputs["de"][:4])
    ]


@pytest.mark.parametrize(
    ("model", "flags", "message"),
    [
        ("multi", [], "the model translates into de, en: choose one with --to"),
        ("multi", ["--to", "fr"], "--to fr: the model does not translate into it; it has de, en"),
        ("toy", ["--to", "de"], "--to de: this model translates into en only"),
    ],
)
def test_translate_language_mistakes_are_one_line(
    toy_multilingual_model_dir, toy_model_dir, tmp_path, capsys, model, flags, message
):
    (tmp_path / "in.txt").write_text("el gato\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    out.write_text("before\n")
    directory = toy_multilingual_model_dir if model == "multi" else toy_model_dir
    code = main(["translate", str(directory), "-i", str(tmp_path / "in.txt"), "-o", str(out), *flags])
    assert code == 2
    assert message in _one_error(capsys)
    assert out.read_text() == "before\n"  # nothing already written lost


def test_attention_takes_the_target_language(toy_multilingual_model_dir, tmp_path, capsys):
    png = tmp_path / "a.png"
    assert (
        main(["attention", str(toy_multilingual_model_dir), "el gato", "--out", str(png), "--to", "de"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[0] in {"der katze", "die katze"}
