"""aiayn.data.vocabulary: an existing SentencePiece model reused unchanged (--spm), its unknown
characters counted, and its mistakes one line."""

from __future__ import annotations

import pytest

from aiayn.data.datadir import DataDir
from aiayn.data.dataset import TokenDataset
from aiayn.data.prepare import prepare
from aiayn.data.sources import PairFiles, SplitFiles
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import AiaynError


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_reuses_a_vocabulary_unchanged(tmp_path, corpus, write_corpus, prepare_corpus):
    first = prepare_corpus(tmp_path / "first", corpus)
    src, tgt = write_corpus(200, seed=7, names=("other.es", "other.en"))
    for spm in (first, first / "spm.model"):  # a data or model directory, or the file itself
        out = prepare(
            tmp_path / "second", SplitFiles(PairFiles(src, tgt)), spm=spm, progress=False, force=True
        )
        assert (out / "spm.model").read_bytes() == (first / "spm.model").read_bytes()
    meta = DataDir(out).meta
    tokenizer = Tokenizer.load(first / "spm.model")
    assert meta["vocab_size"] == meta["requested_vocab_size"] == tokenizer.vocab_size
    assert meta["tokenizer"]["trained_on"] == f"reused: {(first / 'spm.model').resolve()}"
    assert _lines(out / "spm.vocab") == _lines(first / "spm.vocab")
    train = TokenDataset(out, "train")
    raw = _lines(out / "raw" / "train.src")
    assert [list(train[i][0][:-1]) for i in range(len(raw))] == tokenizer.encode(raw)
    assert meta["unk"]["train"] == {"src": 0, "tgt": 0}


def test_a_reused_vocabulary_counts_unknown_characters(tmp_path, corpus, prepare_corpus):
    first = prepare_corpus(tmp_path / "first", corpus)
    tsv = tmp_path / "digits.tsv"
    tsv.write_text("".join(f"the {i} water\tday {i}\n" for i in range(200)))
    meta = DataDir(prepare(tmp_path / "d", SplitFiles(PairFiles(tsv=tsv)), spm=first, progress=False)).meta
    # the first corpus has no digits: each number is one unk piece on each side
    for side in ("src", "tgt"):
        assert sum(meta["unk"][split][side] for split in ("train", "valid", "test")) == 200
    assert meta["unk"]["train"]["tgt"] == meta["pairs"]["train"]


def test_vocabulary_reuse_errors(tmp_path, corpus, prepare_corpus):
    src, tgt, _, _ = corpus
    first = prepare_corpus(tmp_path / "first", corpus)
    size = DataDir(first).meta["vocab_size"]
    with pytest.raises(AiaynError, match=f"has {size} pieces but --vocab-size asks for 8000"):
        prepare(tmp_path / "d", SplitFiles(PairFiles(src, tgt)), spm=first, vocab_size=8000)
    with pytest.raises(AiaynError, match="no SentencePiece model there"):
        prepare(tmp_path / "d", SplitFiles(PairFiles(src, tgt)), spm=tmp_path)
    with pytest.raises(AiaynError, match="not a SentencePiece model"):
        prepare(tmp_path / "d", SplitFiles(PairFiles(src, tgt)), spm=first / "meta.json")
    assert not (tmp_path / "d").exists()
