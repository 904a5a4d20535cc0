"""`aiayn export-hf`, `import-marian` and `export-onnx` (aiayn.cli.interop): the toy translator out to
a Marian directory and back translates as it did; bad directories are one-line errors."""

from __future__ import annotations

from aiayn.cli import main
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from toy_translation import toy_pairs


def test_export_hf_then_import_marian_gives_back_the_translator(toy_model_dir, translator, tmp_path, capsys):
    hf, back = tmp_path / "hf", tmp_path / "back"
    assert main(["export-hf", str(toy_model_dir), str(hf)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {hf}"
    assert main(["import-marian", str(hf), str(back)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {back}"
    texts = [s for s, _ in toy_pairs(6, seed=5)]
    expected = translate_texts(translator, texts, beam_size=2)
    assert translate_texts(Translator.load(back, device="cpu"), texts, beam_size=2) == expected


def test_bad_directories_are_one_line_errors(toy_model_dir, tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("mine")
    for argv, message in (
        (["export-hf", str(tmp_path / "absent"), str(tmp_path / "hf")], "absent"),
        (["import-marian", str(tmp_path / "absent"), str(tmp_path / "out")], "absent"),
        (["export-onnx", str(toy_model_dir), str(tmp_path / "full")], "full"),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["mine.txt"]
