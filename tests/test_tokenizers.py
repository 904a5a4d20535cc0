"""Which tokenizer a model directory names (aiayn.tokenizers.load_tokenizer): aiayn's SentencePiece
model by default, files only from inside the model directory, and one-line errors for anything else."""

import shutil

import pytest

from aiayn.errors import AiaynError
from aiayn.tokenizers import load_tokenizer


def test_without_an_entry_the_directorys_spm_model_is_loaded(toy_model_dir):
    tokenizer = load_tokenizer(toy_model_dir, {})
    ids = tokenizer.encode(["el gato come"])
    assert tokenizer.decode(ids) == ["el gato come"]
    named = load_tokenizer(toy_model_dir, {"tokenizer": {"type": "sentencepiece", "model": "spm.model"}})
    assert named.encode(["el gato come"]) == ids


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"type": "wordpiece"}, r"config.json: unknown tokenizer type 'wordpiece'$"),
        ("spm.model", r"config.json: tokenizer must be an object, got 'spm.model'$"),
    ],
)
def test_an_unknown_or_malformed_entry_is_a_one_line_error(tmp_path, entry, message):
    with pytest.raises(AiaynError, match=message):
        load_tokenizer(tmp_path, {"tokenizer": entry})


def test_tokenizer_files_are_read_from_the_model_directory_only(toy_model_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere.model"
    shutil.copyfile(toy_model_dir / "spm.model", elsewhere)
    for name in (str(elsewhere), "../elsewhere.model", f"../{toy_model_dir.name}/spm.model"):
        with pytest.raises(AiaynError, match=r"config.json: tokenizer.model: .* is not a plain file name"):
            load_tokenizer(toy_model_dir, {"tokenizer": {"type": "sentencepiece", "model": name}})
    settings = {"type": "marian", "source": "spm.model", "target": "spm.model", "vocab": str(elsewhere)}
    with pytest.raises(AiaynError, match=r"config.json: tokenizer.vocab: .* is not a plain file name"):
        load_tokenizer(toy_model_dir, {"tokenizer": settings})


def test_another_models_tokenizer_is_refused_at_load(toy_model_dir, tmp_path, capsys):
    """A larger or smaller spm.model used to load silently, then translate died with an IndexError
    (or SentencePiece's OUT_OF_RANGE) and serve answered 500."""
    import json

    from aiayn.cli import main
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.decode.translator import Translator

    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    size = json.loads((model / "config.json").read_text())["model"]["vocab_size"]
    texts = [f"word{i} palabra{i} and more text number {i}" for i in range(200)]
    other = Tokenizer.train(texts, tmp_path / "other.model", vocab_size=size + 20)
    assert other.vocab_size != size, "the test needs a tokenizer of another size"
    shutil.copyfile(tmp_path / "other.model", model / "spm.model")
    message = f"the tokenizer's vocabulary has {other.vocab_size} ids but config.json's model has {size}"
    with pytest.raises(AiaynError, match=message):
        Translator.load(model)
    (tmp_path / "in.txt").write_text("el gato\n")
    assert main(["translate", str(model), "-i", str(tmp_path / "in.txt")]) == 2
    assert message in capsys.readouterr().err


def test_a_source_vocabulary_smaller_than_the_tokenizer_is_refused_at_load(toy_model_dir, tmp_path):
    """A model of separate vocabularies whose src_vocab_size is under its SentencePiece model's:
    source ids past its embedding failed mid-translation (an IndexError)."""
    from aiayn.config import ModelConfig
    from aiayn.decode.translator import Translator
    from aiayn.model.io import save_model_dir
    from aiayn.model.transformer import Transformer

    size = load_tokenizer(toy_model_dir, {}).vocab_size
    config = ModelConfig(vocab_size=size, src_vocab_size=40, tie_embeddings="decoder", d_model=16, d_ff=32)
    model = save_model_dir(Transformer(config), tmp_path / "model", toy_model_dir / "spm.model")
    message = f"spm.model: the tokenizer's source vocabulary has {size} ids but config.json's model has 40"
    with pytest.raises(AiaynError, match=message):
        Translator.load(model, device="cpu")
