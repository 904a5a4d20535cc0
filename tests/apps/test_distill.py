"""Distillation (aiayn.apps.distill): the distilled data directory holds the teacher's beam-search
translations of the training sources in the teacher's vocabulary, an interrupted translation goes
on from its last finished chunk (a damaged one translated again), and what OUT holds is reused only
when this run made it, never replaced when the user did."""

import json
import shutil

import numpy as np
import pytest

from aiayn.apps import distill as distill_app
from aiayn.apps.distill import distill_data, student_config
from aiayn.config import DecodeConfig, ModelConfig
from aiayn.data.datadir import DataDir
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from toy_translation import write_toy_data_dir

SEARCH = DecodeConfig(beam_size=2)
TRANSLATE_IDS = Translator.translate_ids


class Interrupted(Exception):
    """What stops the run in the middle of its third chunk (as Ctrl-C or a killed process would)."""


@pytest.fixture(scope="module")
def toy_data(toy_model_dir, tmp_path_factory):
    """60 training pairs of the toy task in the toy translator's vocabulary."""
    root = tmp_path_factory.mktemp("distill")
    return write_toy_data_dir(root / "data", toy_model_dir / "spm.model", n_train=60, n_test=10)


@pytest.fixture(scope="module")
def finished(toy_model_dir, toy_data, tmp_path_factory):
    """OUT/data of the toy data, distilled in chunks of 16 with SEARCH."""
    out = tmp_path_factory.mktemp("finished") / "out"
    return distill_data([toy_model_dir], toy_data, out, SEARCH, chunk=16, device="cpu", progress=False)


def count_chunks(monkeypatch, stop_at=None):
    """The sizes of the chunks Translator.translate_ids is given from now on; with `stop_at`, it
    raises Interrupted at that call (a kill in the middle of a chunk)."""
    calls = []

    def counted(self, sources, *args, **kwargs):
        calls.append(len(sources))
        if len(calls) == stop_at:
            raise Interrupted
        return TRANSLATE_IDS(self, sources, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate_ids", counted)
    return calls


def test_the_targets_are_the_teacher_s_translations(toy_model_dir, toy_data, tmp_path):
    out = distill_data(
        [toy_model_dir], toy_data, tmp_path / "out", SEARCH, chunk=16, device="cpu", progress=False
    )
    original, distilled = DataDir(toy_data), DataDir(out)
    assert (
        out == tmp_path / "out" / "data"
        and distilled.prepared
        and not (tmp_path / "out" / "data.parts").exists()
    )
    teacher = Translator.load(toy_model_dir, device="cpu")
    sources = original.raw("train", "src").read_text().splitlines()
    expected = translate_texts(teacher, sources, SEARCH)  # from the text, not the ids: an independent path
    assert distilled.raw("train", "tgt").read_text().splitlines() == expected
    train, before = distilled.tokens("train"), original.tokens("train")
    assert len(train) == len(before) == 60
    for i in range(60):
        assert np.array_equal(train[i][0], before[i][0])  # the same sources
        assert train[i][1].tolist() == teacher.encode([expected[i]])[0]  # the teacher's output + EOS
    assert distilled.spm_path.read_bytes() == original.spm_path.read_bytes()
    assert distilled.raw("test", "tgt").read_text() == original.raw("test", "tgt").read_text()
    assert len(distilled.tokens("valid")) == len(original.tokens("valid"))
    assert distilled.meta["distilled"]["search"]["beam_size"] == 2
    counted = sum(len(teacher.encode([e])[0]) for e in expected)  # pieces + EOS, as prepare counts
    assert distilled.meta["tokens"]["train"]["tgt"] == counted


def test_an_interrupted_run_goes_on_from_its_last_chunk(toy_model_dir, toy_data, tmp_path, monkeypatch):
    count_chunks(monkeypatch, stop_at=3)
    with pytest.raises(Interrupted):
        distill_data(
            [toy_model_dir], toy_data, tmp_path / "out", SEARCH, chunk=16, device="cpu", progress=False
        )
    assert sorted(p.name for p in (tmp_path / "out" / "data.parts").glob("chunk-*")) == [
        "chunk-00000.npz",
        "chunk-00001.npz",
    ]
    calls = count_chunks(monkeypatch)
    out = distill_data(
        [toy_model_dir], toy_data, tmp_path / "out", SEARCH, chunk=16, device="cpu", progress=False
    )
    assert calls == [16, 12]  # chunks 2 and 3 only (60 sources)
    monkeypatch.undo()
    whole = distill_data(
        [toy_model_dir], toy_data, tmp_path / "whole", SEARCH, chunk=16, device="cpu", progress=False
    )
    for name in ("train.tgt.bin", "raw/train.tgt"):
        assert (out / name).read_bytes() == (whole / name).read_bytes()


def _damage(path, kind):
    """Chunk file `path` made as a kill, a full disk or another program could leave it."""
    with np.load(path) as part:
        tokens, lengths = part["tokens"], part["lengths"]
    if kind == "truncated":
        path.write_bytes(path.read_bytes()[:100])
        return
    if kind == "object":
        tokens = np.array([[1, 2], [3]], dtype=object)
    elif kind == "short":
        lengths = lengths[:-4]
        tokens = tokens[: lengths.sum()]
    elif kind == "out of range":
        tokens = tokens + 70_000
    elif kind == "float":
        tokens = tokens.astype(np.float32)
    with open(path, "wb") as f:
        np.savez(f, tokens=tokens, lengths=lengths)


@pytest.mark.parametrize("kind", ["truncated", "object", "short", "out of range", "float"])
def test_a_damaged_chunk_is_named_and_translated_again(
    kind, toy_model_dir, toy_data, finished, tmp_path, monkeypatch, capsys
):
    count_chunks(monkeypatch, stop_at=3)
    run = [[toy_model_dir], toy_data, tmp_path / "out", SEARCH]
    with pytest.raises(Interrupted):
        distill_data(*run, chunk=16, device="cpu", progress=False)
    damaged = tmp_path / "out" / "data.parts" / "chunk-00001.npz"
    _damage(damaged, kind)
    calls = count_chunks(monkeypatch)
    out = distill_data(*run, chunk=16, device="cpu", progress=False)
    assert calls == [16, 16, 12]  # chunk 1 again, then 2 and 3
    assert f"warning: {damaged}: " in capsys.readouterr().err
    for name in ("train.tgt.bin", "raw/train.tgt"):
        assert (out / name).read_bytes() == (finished / name).read_bytes()


def test_a_resume_with_another_search_is_refused(toy_model_dir, toy_data, tmp_path):
    parts = tmp_path / "out" / distill_app.PARTS
    parts.mkdir(parents=True)
    (parts / distill_app.PARTS_FILE).write_text('{"teachers": []}')
    with pytest.raises(AiaynError, match="another distillation"):
        distill_data([toy_model_dir], toy_data, tmp_path / "out", SEARCH, progress=False)


def test_out_is_reused_only_as_this_distillation(toy_model_dir, toy_data, finished, tmp_path):
    def out_holding(data, name):
        shutil.copytree(data, tmp_path / name / "data")
        return tmp_path / name

    run = dict(chunk=16, device="cpu", progress=False)
    reused = distill_data([toy_model_dir], toy_data, out_holding(finished, "same"), SEARCH, **run)
    assert reused == tmp_path / "same" / "data"
    with pytest.raises(AiaynError, match="other teachers, data or search"):
        distill_data(
            [toy_model_dir], toy_data, out_holding(finished, "beam1"), DecodeConfig(beam_size=1), **run
        )
    with pytest.raises(AiaynError, match="is not distill's data directory"):  # the references themselves
        distill_data([toy_model_dir], toy_data, out_holding(toy_data, "original"), SEARCH, **run)
    vision = tmp_path / "vit"
    vision.mkdir()
    (vision / "config.json").write_text(json.dumps({"format_version": 1, "vision": {"patch": 4}}))
    with pytest.raises(AiaynError, match="a vision model"):
        distill_data([vision], toy_data, out_holding(finished, "vision"), SEARCH, **run)


def test_data_in_another_vocabulary_is_refused(toy_model_dir, data_dir, tmp_path):
    with pytest.raises(AiaynError, match="vocabulary is not"):
        distill_data([toy_model_dir], data_dir, tmp_path / "out", SEARCH, progress=False)


def test_the_student_config():
    student = student_config("unused")
    assert (student.model.n_layers, student.model.decoder_layers, student.model.d_model) == (3, 1, 256)
    tiny = student_config("unused", preset="tiny", overrides=["n_decoder_layers=2"], steps=7)
    assert tiny.model == ModelConfig.preset("tiny", n_decoder_layers=2) and tiny.train.max_steps == 7
