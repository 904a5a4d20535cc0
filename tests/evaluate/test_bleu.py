"""sacreBLEU BLEU and chrF: our wrappers give sacreBLEU's own numbers, signatures and lines."""

from __future__ import annotations

import json

import pytest
import sacrebleu
import torch

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.data.tokenizer import Tokenizer
from aiayn.decode.bundle import ModelBundle
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.evaluate import evaluate_files, evaluate_model, score_texts
from aiayn.model.transformer import Transformer

HYPS = ["the cat sat on the mat", "a dog barked loudly", "it is raining today"]
REFS = ["the cat sat on a mat", "the dog barked loudly", "today it rains"]


def test_scores_are_sacrebleus():
    scores = score_texts(HYPS, REFS)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score, abs=1e-4)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-4)
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert scores["bleu_text"].startswith("BLEU|nrefs:1|") and " = " in scores["bleu_text"]
    assert scores["chrf_text"].startswith("chrF2|nrefs:1|")
    assert scores["n_sentences"] == 3
    with pytest.raises(AiaynError, match="3 hypotheses but 2 references"):
        score_texts(HYPS, REFS[:2])


def test_evaluate_files_checks_line_counts_and_utf8(tmp_path):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("\n".join(HYPS) + "\n")
    ref.write_text("\n".join(REFS) + "\n")
    assert evaluate_files(hyp, ref)["bleu"] == pytest.approx(score_texts(HYPS, REFS)["bleu"])
    ref.write_text("\n".join(REFS[:2]) + "\n")
    with pytest.raises(AiaynError, match="has 3 lines but .* has 2"):
        evaluate_files(hyp, ref)
    ref.write_bytes(b"ok\n\xff\n")
    with pytest.raises(AiaynError, match=r"ref.txt:2: invalid UTF-8"):
        evaluate_files(hyp, ref)


def test_a_hypothesis_file_without_newlines_is_refused(tmp_path):
    (tmp_path / "hyp").write_bytes(b"\x00\x01" * 600_000)  # a binary file: no line end in 1.2 MB
    (tmp_path / "ref").write_text("a reference\n")
    with pytest.raises(AiaynError, match=r"hyp:1: a line of more than 1,048,576 bytes; is it a text file\?"):
        evaluate_files(tmp_path / "hyp", tmp_path / "ref")


def test_evaluate_model_writes_what_the_translator_returns(tmp_path):
    """A random model with the data directory's tokenizer (the trainer's dev-BLEU path)."""
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    words = ["uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez"]
    lines = [" ".join(words[(i * 7 + j) % 10] for j in range(1 + i % 5)) for i in range(200)]
    tokenizer = Tokenizer.train(lines, data / "spm.model", vocab_size=40)
    (data / "raw" / "valid.src").write_text("\n".join(lines[:12]) + "\n")
    (data / "raw" / "valid.tgt").write_text("\n".join(lines[12:24]) + "\n")
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, d_model=16, d_ff=32, n_heads=2, n_layers=1)
    model = Transformer(config).train()
    options = DecodeConfig(beam_size=3, max_len_b=6)
    scores = evaluate_model(model, data, "valid", options, out_dir=tmp_path / "eval", limit=10)
    assert model.training  # put back as it was
    hyps = (tmp_path / "eval" / "valid.hyp").read_text().splitlines()
    expected = translate_texts(
        Translator(ModelBundle([model.eval()], tokenizer)), lines[:10], beam_size=3, max_len_b=6
    )
    assert hyps == expected
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [lines[12:22]]).score, abs=1e-3)
    assert json.loads((tmp_path / "eval" / "scores.json").read_text())["split"] == "valid"
    with pytest.raises(AiaynError, match="test.src: no such file"):
        evaluate_model(model, data, "test", out_dir=tmp_path / "never")
    assert not (tmp_path / "never").exists()  # a missing split leaves no --out directory behind


def test_an_over_long_source_is_translated_in_parts_with_a_warning_naming_its_line(tmp_path):
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    lines = ["uno dos", "uno dos tres cuatro cinco seis siete ocho nueve diez", "tres"]
    tokenizer = Tokenizer.train(lines * 20, data / "spm.model", vocab_size=30)
    (data / "raw" / "test.src").write_text("\n".join(lines) + "\n")
    (data / "raw" / "test.tgt").write_text("\n".join(lines) + "\n")
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, d_model=16, d_ff=32, n_heads=2, n_layers=1, positions="learned",
        max_positions=8,
    )  # fmt: skip
    with pytest.warns(
        UserWarning, match=r"raw/test.src:2: \d+ tokens, over the limit of 8: translated in \d+ parts"
    ):
        evaluate_model(Transformer(config), data, "test", DecodeConfig(beam_size=2, max_len_b=3))
