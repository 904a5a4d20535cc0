"""The joint SentencePiece BPE vocabulary: special ids, round trip, no bos/eos from encode."""

from __future__ import annotations

import pytest

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import AiaynError

SENTENCES = [
    "En el principio crió Dios los cielos y la tierra.",
    "In the beginning God created the heaven and the earth.",
    "Y la tierra estaba desordenada y vacía, y las tinieblas estaban sobre la haz del abismo.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "Drücken Sie Strg+A, um den gesamten Text auszuwählen.",
] * 40


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return Tokenizer.train(SENTENCES, tmp_path_factory.mktemp("spm") / "spm.model", vocab_size=200)


def test_special_ids_match_model_config(tokenizer):
    sp = tokenizer._sp
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
    assert tokenizer.path.name == "spm.model" and tokenizer.path.with_suffix(".vocab").is_file()
    assert tokenizer.vocab_size == 200


def test_round_trip_and_no_bos_eos(tokenizer):
    texts = SENTENCES[:5]
    ids = tokenizer.encode(texts)
    assert all(ids) and not {BOS_ID, EOS_ID, PAD_ID} & {i for seq in ids for i in seq}
    assert tokenizer.decode(ids) == texts
    reloaded = Tokenizer.load(tokenizer.path)
    assert reloaded.encode(texts) == ids


def test_decode_skips_special_ids(tokenizer):
    ids = tokenizer.encode(["la tierra"])[0]
    assert tokenizer.decode([[BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]]) == ["la tierra"]


def test_pieces_are_subword_strings(tokenizer):
    ids = tokenizer.encode(["la tierra"])[0]
    pieces = tokenizer.pieces(ids)
    assert len(pieces) == len(ids) and "".join(pieces).replace("▁", " ").strip() == "la tierra"


def test_training_is_deterministic(tmp_path, tokenizer):
    again = Tokenizer.train(SENTENCES, tmp_path / "again.model", vocab_size=200)
    assert again.encode(SENTENCES[:5]) == tokenizer.encode(SENTENCES[:5])


def test_small_corpus_gets_a_smaller_vocabulary(tmp_path):
    small = Tokenizer.train(["ab ab ba"] * 5, tmp_path / "small.model", vocab_size=1000)
    assert 4 < small.vocab_size < 1000


def test_load_errors(tmp_path):
    with pytest.raises(AiaynError, match="no SentencePiece model"):
        Tokenizer.load(tmp_path / "missing.model")
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(AiaynError, match="not a SentencePiece model"):
        Tokenizer.load(tmp_path / "junk.model")


def test_a_vocabulary_smaller_than_the_characters_says_the_size_to_use(tmp_path):
    """SentencePiece needs a piece per character; fewer is a one-line error with the size it needs."""
    with pytest.raises(AiaynError) as caught:
        Tokenizer.train(SENTENCES, tmp_path / "spm.model", vocab_size=20)
    needed = len(set("".join(SENTENCES))) + 4  # every character (the space as "▁") and 4 specials
    assert str(caught.value) == (
        f"vocab_size 20 is smaller than the {needed} pieces this corpus's characters need; "
        f"use a vocab_size of at least {needed}"
    )
    assert Tokenizer.train(SENTENCES, tmp_path / "spm.model", vocab_size=needed).vocab_size == needed
