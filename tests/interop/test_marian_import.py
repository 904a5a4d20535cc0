"""import-marian: random-initialised MarianMTModels of several shapes give HF's logits in aiayn."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from marian_helpers import make_marian
from safetensors.torch import load_file

from aiayn.cli import main
from aiayn.errors import AiaynError
from aiayn.interop.marian_import import import_marian
from aiayn.model.io import load_model_dir

transformers = pytest.importorskip("transformers", reason="needs transformers (pip install transformers)")

SHAPES = {
    "swish-shared-scaled": dict(d_model=32, heads=2, ffn=64, enc_layers=2, dec_layers=1, activation="swish"),
    "gelu-separate-unscaled": dict(
        d_model=64, heads=4, ffn=48, enc_layers=1, dec_layers=2, activation="gelu", scale_embedding=False
    ),
    "relu-untied-output": dict(d_model=32, heads=4, ffn=32, enc_layers=1, dec_layers=1, activation="relu"),
}
VOCAB = {"swish-shared-scaled": "shared", "gelu-separate-unscaled": "separate"}  # default: shared
TIE = {"swish-shared-scaled": "all", "gelu-separate-unscaled": "decoder", "relu-untied-output": "none"}


def padded_batch(src_vocab: int, tgt_vocab: int, pad: int, start: int, eos: int = 0):
    """Right-padded sources (pieces + EOS) and decoder inputs (start + pieces), as generate builds them."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, src_vocab, (3, 9), generator=g)
    src[src == pad] = 3
    lengths = [9, 5, 2]
    for row, n in enumerate(lengths):
        src[row, n - 1] = eos
        src[row, n:] = pad
    tgt_in = torch.randint(3, tgt_vocab, (3, 7), generator=g)
    tgt_in[tgt_in == pad] = 3
    tgt_in[:, 0] = start
    return src, tgt_in


@pytest.mark.parametrize("shape", SHAPES)
def test_logits_equal_hf(tokenizer_files, tmp_path, shape):
    kwargs = dict(SHAPES[shape], tie_word_embeddings=shape != "relu-untied-output")
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files[VOCAB.get(shape, "shared")], **kwargs)
    model, info = load_model_dir(import_marian(hf_dir, tmp_path / "aiayn"))
    config = model.config
    assert config.tie_embeddings == TIE[shape]
    assert info["tokenizer"]["type"] == "marian" and config.sinusoid_layout == "concat"
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    src, tgt_in = padded_batch(config.source_vocab_size, config.vocab_size, config.pad_id, config.start_id)
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=src.ne(config.pad_id), decoder_input_ids=tgt_in).logits
        actual = model(src, tgt_in)  # (batch, tgt_len, vocab)
    assert expected.abs().max() > 1.0  # a real comparison, not two tiny numbers
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=0)


def test_cli_and_pytorch_bin(tokenizer_files, tmp_path, capsys):
    """Legacy pickled weights are read with weights_only=True; the CLI writes the same model."""
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    torch.save(load_file(hf_dir / "model.safetensors"), hf_dir / "pytorch_model.bin")  # as older OPUS-MT
    (hf_dir / "model.safetensors").unlink()
    assert main(["import-marian", str(hf_dir), str(tmp_path / "out")]) == 0
    assert "wrote" in capsys.readouterr().out
    model, _ = load_model_dir(tmp_path / "out")
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    torch.testing.assert_close(model.output_bias, hf.final_logits_bias[0], atol=0, rtol=0)
    torch.testing.assert_close(model.tgt_embed.weight, hf.model.shared.weight, atol=0, rtol=0)


def test_sharded_safetensors(tokenizer_files, tmp_path):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"], max_shard_size="20KB")
    assert (hf_dir / "model.safetensors.index.json").is_file()
    model, _ = load_model_dir(import_marian(hf_dir, tmp_path / "out"))
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    torch.testing.assert_close(
        model.decoder.layers[0].ffn.linear2.weight, hf.model.decoder.layers[0].fc2.weight, atol=0, rtol=0
    )


def edit_config(hf_dir, **changes):
    path = hf_dir / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(model_type="bart"), "model_type is 'bart', not 'marian'"),
        (dict(decoder_attention_heads=4), "encoder_attention_heads=2 differs from decoder_attention_heads=4"),
        (dict(activation_function="tanh"), "activation_function='tanh' is not relu/gelu/swish"),
        (dict(eos_token_id=[0, 1]), r"eos_token_id=\[0, 1\]"),
        (dict(vocab_size=10**12), r"weights do not match config.json \(vocab_size=1000000000000\)"),
        (dict(encoder_layers=100_000), r"encoder_layers=100000 but the weights hold 2 encoder layers"),
        (dict(d_model=64), r"weights do not match config.json \(d_model=64\)"),
        (dict(d_model="32"), r"express this Marian model in aiayn: d_model must be an integer, got '32'"),
    ],
)
def test_inexpressible_configs_are_refused(tokenizer_files, tmp_path, changes, message):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    edit_config(hf_dir, **changes)
    with pytest.raises(AiaynError, match=message):
        import_marian(hf_dir, tmp_path / "out")


def test_missing_files(tokenizer_files, tmp_path, capsys):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    (hf_dir / "target.spm").unlink()
    assert main(["import-marian", str(hf_dir), str(tmp_path / "out")]) == 2
    assert "missing tokenizer file(s) target.spm" in capsys.readouterr().err
    (hf_dir / "model.safetensors").unlink()
    with pytest.raises(AiaynError, match="no model.safetensors or pytorch_model.bin"):
        import_marian(hf_dir, tmp_path / "out")
    with pytest.raises(AiaynError, match="no config.json"):
        import_marian(tmp_path, tmp_path / "out")


class Payload:
    """Not a tensor: a pickle that would run code on load without weights_only."""


def test_pickled_objects_are_refused(tokenizer_files, tmp_path):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    (hf_dir / "model.safetensors").unlink()
    torch.save({"model.shared.weight": Payload()}, hf_dir / "pytorch_model.bin")
    with pytest.raises(AiaynError, match="cannot be read as plain tensors"):
        import_marian(hf_dir, tmp_path / "out")
    for plain in ({"model.shared.weight": 3}, [torch.zeros(2)]):  # plain data, not a state dict
        torch.save(plain, hf_dir / "pytorch_model.bin")
        with pytest.raises(AiaynError, match=r"pytorch_model.bin: not a state dict \(a mapping of names"):
            import_marian(hf_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_shard_names_stay_inside_the_directory(tokenizer_files, tmp_path):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"], max_shard_size="20KB")
    index = hf_dir / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    name, shard = next(iter(data["weight_map"].items()))
    shutil.copyfile(hf_dir / shard, tmp_path / "outside.safetensors")
    data["weight_map"][name] = "../outside.safetensors"
    index.write_text(json.dumps(data))
    with pytest.raises(AiaynError, match=r"weight_map: '../outside.safetensors' is not a plain file name"):
        import_marian(hf_dir, tmp_path / "out")


def test_a_failed_import_leaves_the_output_as_it_was(tokenizer_files, tmp_path):
    """A failed re-import must not leave new tokenizer files beside the old weights."""
    out = import_marian(make_marian(tmp_path / "hf", tokenizer_files["shared"]), tmp_path / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = make_marian(tmp_path / "hf2", tokenizer_files["separate"])
    edit_config(other, decoder_attention_heads=4)  # fails after the tokenizer files are read
    with pytest.raises(AiaynError, match="differs from decoder_attention_heads=4"):
        import_marian(other, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(AiaynError, match="no config.json"):
        import_marian(tmp_path / "nowhere", tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_refuses_to_replace_a_directory_that_is_not_a_model_directory(tokenizer_files, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    with pytest.raises(AiaynError, match="mine exists and is not an aiayn model directory"):
        import_marian(hf_dir, tmp_path / "mine")
    with pytest.raises(AiaynError, match="cannot be the Marian directory itself"):
        import_marian(hf_dir, hf_dir)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_reimporting_never_deletes_what_the_import_did_not_write(tokenizer_files, tmp_path):
    """The import replaces its output whole: an `aiayn evaluate` eval/ beside an old model stops it."""
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["separate"])
    out = import_marian(hf_dir, tmp_path / "out")
    import_marian(make_marian(tmp_path / "hf2", tokenizer_files["shared"]), out)  # its own files: replaced
    (out / "eval").mkdir()
    (out / "eval" / "scores.json").write_text("{}")
    before = {p.name for p in out.iterdir()}
    with pytest.raises(AiaynError, match=r"out also holds eval, which replacing the model would delete"):
        import_marian(hf_dir, out)
    assert {p.name for p in out.iterdir()} == before and (out / "eval" / "scores.json").read_text() == "{}"


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: (d / "config.json").write_text("[]"), r"config.json: expected a JSON object of settings"),
        (lambda d: (d / "config.json").write_bytes(b'{"a": "\xff"}'), r"config.json: not UTF-8 text"),
        (lambda d: edit_config(d, vocab_size=None), r"vocab_size must be a positive integer, got None"),
        (
            lambda d: (d / "tokenizer_config.json").write_text('"x"'),
            r"tokenizer_config.json: expected a JSON",
        ),
        (
            lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:5000]),
            r"model.safetensors: cannot be read as safetensors",
        ),
    ],
)
def test_a_damaged_marian_directory_is_one_line(tokenizer_files, tmp_path, capsys, damage, message):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    damage(hf_dir)
    capsys.readouterr()  # transformers' progress bars while the directory was made
    assert main(["import-marian", str(hf_dir), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_errors_name_the_users_files_not_the_temporary_copy(tokenizer_files, tmp_path, capsys):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    (hf_dir / "source.spm").write_bytes(b"not a sentencepiece model")
    capsys.readouterr()
    assert main(["import-marian", str(hf_dir), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(hf_dir / "source.spm") in err and ".tmp-" not in err, err


def test_config_errors_name_the_file_and_the_missing_key(tokenizer_files, tmp_path):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    edit_config(hf_dir, decoder_attention_heads=4)
    with pytest.raises(
        AiaynError, match=re.escape(f"{hf_dir / 'config.json'}: encoder_attention_heads=2 differs")
    ):
        import_marian(hf_dir, tmp_path / "out")
    path = hf_dir / "config.json"
    data = json.loads(path.read_text())
    data["decoder_attention_heads"] = data["encoder_attention_heads"]  # undo the first edit
    del data["encoder_layers"]
    path.write_text(json.dumps(data))
    with pytest.raises(AiaynError, match=re.escape(f"{path}: no 'encoder_layers' setting")):
        import_marian(hf_dir, tmp_path / "out")


def test_a_pickled_module_is_refused_without_pytorchs_advice(tokenizer_files, tmp_path, capsys):
    hf_dir = make_marian(tmp_path / "hf", tokenizer_files["shared"])
    (hf_dir / "model.safetensors").unlink()
    torch.save(torch.nn.Linear(2, 2), hf_dir / "pytorch_model.bin")
    capsys.readouterr()
    assert main(["import-marian", str(hf_dir), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot be read as plain tensors" in err, err
    assert "\x1b" not in err and "weights_only" not in err, err


def test_an_edited_vocabulary_that_outgrows_the_model_is_refused_at_load(tokenizer_files, tmp_path):
    from aiayn.decode.translator import Translator

    out = import_marian(make_marian(tmp_path / "hf", tokenizer_files["shared"]), tmp_path / "out")
    vocab = json.loads((out / "vocab.json").read_text())
    size = json.loads((out / "config.json").read_text())["model"]["vocab_size"]
    vocab["an extra piece"] = size + 4
    (out / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(AiaynError, match=rf"vocab.json: the tokenizer's source vocabulary has {size + 5} "):
        Translator.load(out)
