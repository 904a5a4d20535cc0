"""tokenizer.json (aiayn.interop.onnx_tokenizer) against SentencePiece and MarianTokenizer themselves.

The trained toy translator's BPE model is checked in test_onnx_export.py; here a unigram model
(OPUS-MT's kind) and a Marian directory (its source.spm and a vocab.json of two models' pieces).
"""

from __future__ import annotations

import json

import pytest
import sentencepiece as spm
from marian_helpers import SOURCE_WORDS, quiet_sacremoses, synthetic_text

from aiayn.interop.onnx_tokenizer import tokenizer_json

tokenizers = pytest.importorskip("tokenizers", reason="needs tokenizers (installed with transformers)")
SPECIAL = {"eos": "</s>", "unk": "<unk>", "pad": "<pad>"}


def load(data: dict) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(json.dumps(data))


def test_a_unigram_model_splits_as_sentencepiece(tmp_path):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(synthetic_text(SOURCE_WORDS, 400, 1)), model_prefix=str(tmp_path / "u"),
        vocab_size=30, model_type="unigram", minloglevel=2, eos_id=0, unk_id=1, bos_id=-1, pad_id=2,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "u.model"))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    tokenizer = load(tokenizer_json((tmp_path / "u.model").read_bytes(), vocab, SPECIAL))
    texts = synthetic_text(SOURCE_WORDS, 60, 5) + ["  dos   gatos ", "zzz qqq"]
    for text in texts:
        assert tokenizer.encode(text).ids == sp.encode(text) + [0], text
    pieces = sp.encode(texts[0], out_type=str)
    assert tokenizer.decode([vocab[p] for p in pieces]) == sp.decode(pieces)


def test_a_marian_directory_tokenizes_as_marian_tokenizer(tokenizer_files):
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    directory = tokenizer_files["shared"]
    vocab = json.loads((directory / "vocab.json").read_text())
    tokenizer = load(tokenizer_json((directory / "source.spm").read_bytes(), vocab, SPECIAL))
    with quiet_sacremoses():
        marian = transformers.MarianTokenizer.from_pretrained(directory)
    texts = synthetic_text(SOURCE_WORDS, 60, 9)
    assert [e.ids for e in tokenizer.encode_batch(texts)] == marian(texts)["input_ids"]
