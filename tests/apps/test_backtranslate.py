"""Back-translation (aiayn.apps.backtranslate): monolingual text through a reverse model into
a corpus prepare takes."""

from __future__ import annotations

import json

import pytest

from aiayn.apps import backtranslate as bt
from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.decode.texts import translate_texts
from aiayn.errors import AiaynError

BEAM = bt.BackTranslation(DecodeConfig(beam_size=2), None)


def test_beam_back_translation_is_the_reverse_models_translation(
    toy_model_dir, translator, monolingual_text, tmp_path
):
    path, lines = monolingual_text
    out = bt.backtranslate(toy_model_dir, path, tmp_path / "bt", BEAM, device="cpu", chunk=7, progress=False)
    # the toy model translates es -> en: as a reverse model its outputs are the forward sources
    assert (out / "bt.en").read_text(encoding="utf-8").splitlines() == translate_texts(
        translator, lines, beam_size=2
    )
    assert (out / "bt.es").read_text(encoding="utf-8").splitlines() == lines
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["src_lang"], meta["tgt_lang"], meta["pairs"], meta["empty_lines"]) == ("en", "es", 25, 1)
    assert not (out / "parts").exists()


def test_sampled_and_tagged_resumes_to_the_same_corpus(
    toy_model_dir, monolingual_text, tmp_path, monkeypatch
):
    path, _ = monolingual_text
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


def test_a_finished_out_is_reused_only_for_the_same_inputs(toy_model_dir, monolingual_text, tmp_path):
    path, _ = monolingual_text
    out = bt.backtranslate(toy_model_dir, path, tmp_path / "bt", BEAM, device="cpu", progress=False)
    assert bt.backtranslate(toy_model_dir, path, out, BEAM, device="cpu", progress=False) == out
    with pytest.raises(AiaynError, match="another model, text or search"):
        bt.backtranslate(toy_model_dir, path, out, bt.BackTranslation(DecodeConfig(beam_size=3), None))


def test_parts_of_another_search_are_refused(toy_model_dir, monolingual_text, tmp_path, monkeypatch):
    path, _ = monolingual_text
    monkeypatch.setattr(bt, "_join", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        bt.backtranslate(toy_model_dir, path, tmp_path / "bt", BEAM, device="cpu", chunk=7, progress=False)
    other = bt.BackTranslation(DecodeConfig(beam_size=3), None)
    with pytest.raises(AiaynError, match="holds the parts of another model, text or search"):
        bt.backtranslate(toy_model_dir, path, tmp_path / "bt", other, device="cpu", chunk=7, progress=False)
