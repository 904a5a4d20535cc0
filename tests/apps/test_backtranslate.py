"""`aiayn backtranslate`: monolingual text through a reverse model into a corpus prepare takes."""

from __future__ import annotations

import json

import pytest
from tests.toy import toy_pairs

from aiayn.apps import backtranslate as bt
from aiayn.cli import main
from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.errors import AiaynError

BEAM = bt.BackTranslation(DecodeConfig(beam_size=2), None)


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "mono.es"
    lines = [s for s, _ in toy_pairs(25, seed=3)]
    path.write_text("\n".join(lines[:10]) + "\n\n" + "\n".join(lines[10:]) + "\n", encoding="utf-8")
    return path, lines


def test_beam_back_translation_is_the_reverse_models_translation(toy_model_dir, translator, text, tmp_path):
    path, lines = text
    out = bt.backtranslate(toy_model_dir, path, tmp_path / "bt", BEAM, device="cpu", chunk=7, progress=False)
    # the toy model translates es -> en: as a reverse model its outputs are the forward sources
    assert (out / "bt.en").read_text(encoding="utf-8").splitlines() == translator.translate(
        lines, beam_size=2
    )
    assert (out / "bt.es").read_text(encoding="utf-8").splitlines() == lines
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["src_lang"], meta["tgt_lang"], meta["pairs"], meta["empty_lines"]) == ("en", "es", 25, 1)
    assert not (out / "parts").exists()


def test_sampled_and_tagged_resumes_to_the_same_corpus(toy_model_dir, text, tmp_path, monkeypatch):
    path, _ = text
    how = bt.BackTranslation(DecodeConfig(beam_size=1), SamplingConfig(temperature=1.5, seed=4), tag=True)
    whole = bt.backtranslate(
        toy_model_dir, path, tmp_path / "whole", how, device="cpu", chunk=7, progress=False
    )
    calls = {"n": 0}
    real = bt._join

    def stop(*args):
        calls["n"] += 1
        raise KeyboardInterrupt

    monkeypatch.setattr(bt, "_join", stop)
    with pytest.raises(KeyboardInterrupt):
        bt.backtranslate(toy_model_dir, path, tmp_path / "again", how, device="cpu", chunk=7, progress=False)
    (tmp_path / "again" / "parts" / "part-00002.en").unlink()  # as if killed before its last parts
    monkeypatch.setattr(bt, "_join", real)
    again = bt.backtranslate(
        toy_model_dir, path, tmp_path / "again", how, device="cpu", chunk=7, progress=False
    )
    sources = (whole / "bt.en").read_text(encoding="utf-8").splitlines()
    assert (again / "bt.en").read_text(encoding="utf-8").splitlines() == sources
    assert all(line.startswith(bt.TAG + " ") for line in sources)


def test_a_finished_out_is_reused_only_for_the_same_inputs(toy_model_dir, text, tmp_path):
    path, _ = text
    out = bt.backtranslate(toy_model_dir, path, tmp_path / "bt", BEAM, device="cpu", progress=False)
    assert bt.backtranslate(toy_model_dir, path, out, BEAM, device="cpu", progress=False) == out
    with pytest.raises(AiaynError, match="another model, text or search"):
        bt.backtranslate(toy_model_dir, path, out, bt.BackTranslation(DecodeConfig(beam_size=3), None))


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


def test_the_command_line_writes_a_corpus_prepare_takes(toy_model_dir, text, tmp_path, capsys):
    from aiayn.data.datadir import DataDir
    from aiayn.data.prepare import prepare
    from aiayn.data.recipe import load_recipe

    path, _ = text
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


def test_parts_of_another_search_are_refused(toy_model_dir, text, tmp_path, monkeypatch):
    path, _ = text
    monkeypatch.setattr(bt, "_join", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        bt.backtranslate(toy_model_dir, path, tmp_path / "bt", BEAM, device="cpu", chunk=7, progress=False)
    other = bt.BackTranslation(DecodeConfig(beam_size=3), None)
    with pytest.raises(AiaynError, match="holds the parts of another model, text or search"):
        bt.backtranslate(toy_model_dir, path, tmp_path / "bt", other, device="cpu", chunk=7, progress=False)
