"""MarianVocabTokenizer gives exactly the ids and text of transformers' MarianTokenizer."""

from __future__ import annotations

import pytest
from marian_helpers import SOURCE_WORDS, TARGET_WORDS, quiet_sacremoses, synthetic_text

from aiayn.errors import AiaynError
from aiayn.interop.marian_tokenizer import MarianVocabTokenizer, split_language_code

transformers = pytest.importorskip("transformers", reason="needs transformers (pip install transformers)")

SOURCES = synthetic_text(SOURCE_WORDS, 20, 11) + ["Alpha, BETA!  gamma", "xyzzy qq", "", ">>de<< alpha beta"]
TARGETS = synthetic_text(TARGET_WORDS, 20, 12) + ["Drei, VIER!", "ÿ", ""]


def load_both(tok_dir):
    settings = {"source": "source.spm", "target": "target.spm", "vocab": "vocab.json"}
    separate = (tok_dir / "target_vocab.json").is_file()
    if separate:
        settings["target_vocab"] = "target_vocab.json"
    ours = MarianVocabTokenizer.from_settings(tok_dir, settings)
    with quiet_sacremoses():
        theirs = transformers.MarianTokenizer.from_pretrained(tok_dir, separate_vocabs=separate)
    return ours, theirs


@pytest.mark.parametrize("kind", ["shared", "separate"])
def test_ids_equal_marian_tokenizer(tokenizer_files, kind):
    ours, theirs = load_both(tokenizer_files[kind])
    eos = theirs.eos_token_id
    expected_src = theirs(SOURCES)["input_ids"]
    assert [ids + [eos] for ids in ours.encode(SOURCES)] == expected_src
    expected_tgt = theirs(text_target=TARGETS)["input_ids"]
    assert [ids + [eos] for ids in ours.encode_target(TARGETS)] == expected_tgt
    assert any(ours.unk_id in ids for ids in expected_src + expected_tgt)  # unknown pieces were exercised


@pytest.mark.parametrize("kind", ["shared", "separate"])
def test_decode_equals_marian_tokenizer(tokenizer_files, kind):
    ours, theirs = load_both(tokenizer_files[kind])
    ids = theirs(text_target=TARGETS)["input_ids"]
    ids = [row + [theirs.pad_token_id] * 2 for row in ids]  # EOS and padding are dropped
    assert ours.decode(ids) == theirs.batch_decode(ids, skip_special_tokens=True)
    assert ours.decode(ids)[0] == TARGETS[0]


def test_pieces_and_sizes(tokenizer_files):
    ours, theirs = load_both(tokenizer_files["separate"])
    (ids,) = ours.encode(["alpha beta"])
    assert "".join(ours.pieces(ids)).replace("\u2581", " ").strip() == "alpha beta"
    (tgt_ids,) = ours.encode_target(["drei vier"])
    assert ours.target_pieces(tgt_ids) == theirs.convert_ids_to_tokens(tgt_ids)  # target side
    assert ours.vocab_size == len(theirs.target_encoder)  # get_tgt_vocab() raises in transformers 5
    assert ours.src_vocab_size == len(theirs.get_src_vocab())


def test_language_code():
    assert split_language_code(">>fr<< Bonjour") == ([">>fr<<"], " Bonjour")
    assert split_language_code("no >>code<< here") == ([], "no >>code<< here")
    assert split_language_code(">>unclosed") == ([], ">>unclosed")


def test_bad_files(tokenizer_files, tmp_path):
    d = tokenizer_files["shared"]
    with pytest.raises(AiaynError, match="vocabulary file not found"):
        MarianVocabTokenizer(d / "source.spm", d / "target.spm", tmp_path / "vocab.json")
    (tmp_path / "vocab.json").write_text('{"a": 0}')
    with pytest.raises(AiaynError, match="no '<unk>' entry"):
        MarianVocabTokenizer(d / "source.spm", d / "target.spm", tmp_path / "vocab.json")
    (tmp_path / "bad.spm").write_text("not a model")
    with pytest.raises(AiaynError, match="not a SentencePiece model"):
        MarianVocabTokenizer(tmp_path / "bad.spm", d / "target.spm", d / "vocab.json")


def test_settings_name_files_inside_the_model_directory_only(tokenizer_files):
    settings = {"source": "source.spm", "target": "target.spm", "vocab": "../shared/vocab.json"}
    with pytest.raises(AiaynError, match=r"tokenizer.vocab: '../shared/vocab.json' is not a plain file name"):
        MarianVocabTokenizer.from_settings(tokenizer_files["separate"], settings)
    settings = {
        "source": "source.spm",
        "target": str(tokenizer_files["shared"] / "target.spm"),
        "vocab": "vocab.json",
    }
    with pytest.raises(AiaynError, match=r"tokenizer.target: .* is not a plain file name"):
        MarianVocabTokenizer.from_settings(tokenizer_files["separate"], settings)
