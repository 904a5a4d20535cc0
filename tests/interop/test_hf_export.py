"""export-hf: aiayn models load in transformers' MarianMTModel with equal logits (interleaved sin/cos
included, through the model-dimension permutation), renumbered to OPUS-MT's vocabulary layout
(</s> 0, <unk> 1, <pad> last), and MarianTokenizer reproduces aiayn's pieces with those ids."""

from __future__ import annotations

import json
import re
from contextlib import nullcontext

import pytest
import sentencepiece as spm
import torch
from marian_helpers import SOURCE_WORDS, TARGET_WORDS, batch, quiet_sacremoses, synthetic_text

from aiayn.cli import main
from aiayn.config import ModelConfig
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import AiaynError
from aiayn.interop.hf_export import export_hf
from aiayn.interop.marian_import import import_marian
from aiayn.interop.opus_layout import OpusLayout
from aiayn.model.io import load_model_dir, save_model_dir
from aiayn.model.transformer import Transformer

transformers = pytest.importorskip("transformers", reason="needs transformers (pip install transformers)")

TEXTS = synthetic_text(SOURCE_WORDS + TARGET_WORDS, 300, 3)
CONFIGS = {
    "paper-default": dict(),  # interleaved sin/cos, relu, tie all, scaled embeddings
    "concat-untied-separate": dict(
        sinusoid_layout="concat", tie_embeddings="none", src_vocab_size=70, activation="gelu",
        final_logits_bias=True, n_decoder_layers=2,
    ),
    "tie-decoder-swish": dict(tie_embeddings="decoder", activation="swish", scale_embedding=False),
    "learned-start": dict(decoder_start_id=None, final_logits_bias=True),  # <s> starts the decoder
}  # fmt: skip


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    return Tokenizer.train(TEXTS, tmp_path_factory.mktemp("spm") / "spm.model", vocab_size=64)


def random_model(tmp_path, spm_model, **overrides) -> Transformer:
    base = dict(vocab_size=spm_model.vocab_size, d_model=32, d_ff=64, n_heads=4, n_layers=2)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**(base | overrides))).eval()
    with torch.no_grad():  # LayerNorms and biases away from 1 / 0 so that every mapping matters
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.5)
    save_model_dir(model, tmp_path / "model", spm_model.path)
    return model


def hf_logits(hf_dir, src, tgt_in, mask):
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        return hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt_in).logits


def exported_ids(ids: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """aiayn ids -> the export's (order: exported id -> aiayn id)."""
    return torch.argsort(order)[ids]


@pytest.mark.parametrize("name", CONFIGS)
def test_exported_logits_equal(tmp_path, spm_model, name):
    model = random_model(tmp_path, spm_model, **CONFIGS[name])
    src, tgt_in = batch(model.config)
    with torch.no_grad():
        expected = model(src, tgt_in)  # (batch, tgt_len, vocab), aiayn's ids
    with pytest.warns(UserWarning, match="learned <s>") if name == "learned-start" else nullcontext():
        out = export_hf(tmp_path / "model", tmp_path / "hf")
    assert expected.abs().max() > 1.0
    layout = OpusLayout.of(model.config)
    src_x, tgt_x = exported_ids(src, layout.source), exported_ids(tgt_in, layout.target)
    expected = expected[..., layout.target]  # column j: the export's id j
    mask = src.ne(model.config.pad_id)
    torch.testing.assert_close(hf_logits(out, src_x, tgt_x, mask), expected, atol=1e-4, rtol=0)
    # and back: import-marian of the export computes the same function again (in the export's ids)
    back, _ = load_model_dir(import_marian(out, tmp_path / "back"))
    assert back.config.tie_embeddings == model.config.tie_embeddings
    assert back.config.zero_start == model.config.zero_start
    with torch.no_grad():
        torch.testing.assert_close(back(src_x, tgt_x), expected, atol=1e-4, rtol=0)


def test_marian_tokenizer_reads_the_export(tmp_path, spm_model):
    model = random_model(tmp_path, spm_model)
    assert main(["export-hf", str(tmp_path / "model"), str(tmp_path / "hf")]) == 0
    with quiet_sacremoses():
        theirs = transformers.MarianTokenizer.from_pretrained(tmp_path / "hf")
    order, config = OpusLayout.of(model.config).target, model.config
    texts = TEXTS[:20] + ["Unseen Wörds!"]
    ours = [exported_ids(torch.tensor(ids + [config.eos_id]), order) for ids in spm_model.encode(texts)]
    assert theirs(texts)["input_ids"] == [row.tolist() for row in ours]
    ids = [ids + [config.eos_id, config.pad_id, config.pad_id] for ids in spm_model.encode(texts[:20])]
    exported = [exported_ids(torch.tensor(row), order).tolist() for row in ids]
    assert theirs.batch_decode(exported, skip_special_tokens=True) == spm_model.decode(ids)


def test_the_export_is_laid_out_as_opus_mt(tmp_path, spm_model):
    """OPUS-MT's layout, as Hugging Face's convert_marian_to_pytorch.py writes it: </s> 0, <unk> 1,
    <pad> last, a zero <pad> row that starts the decoder and is the pad and banned id, bos 0."""
    model = random_model(tmp_path, spm_model, final_logits_bias=True)
    out = export_hf(tmp_path / "model", tmp_path / "hf")
    vocab = json.loads((out / "vocab.json").read_text())
    last = spm_model.vocab_size - 1
    assert (vocab["</s>"], vocab["<unk>"], vocab["<pad>"]) == (0, 1, last)
    assert sorted(vocab.values()) == list(range(spm_model.vocab_size))
    sp = spm.SentencePieceProcessor(model_file=str(spm_model.path))
    assert [vocab[sp.id_to_piece(i)] for i in range(4, 8)] == [3, 4, 5, 6]  # the pieces keep their order
    generation = json.loads((out / "generation_config.json").read_text())
    ids = dict(pad_token_id=last, eos_token_id=0, forced_eos_token_id=0, bos_token_id=0)
    ids["decoder_start_token_id"] = last
    assert generation == ids | dict(bad_words_ids=[[last], [vocab["<s>"]]], num_beams=4, max_length=512)
    config = json.loads((out / "config.json").read_text())
    assert {k: config[k] for k in ids} == ids
    hf = transformers.MarianMTModel.from_pretrained(out)
    assert hf.model.decoder.embed_tokens.weight[last].abs().max() == 0  # the decoder starts from zeros
    bias = model.output_bias[model.config.pad_id]
    assert float(hf.final_logits_bias[0, last]) == pytest.approx(float(bias)) and bias != 0


def test_inexpressible_models_are_refused(tmp_path, spm_model, capsys):
    random_model(tmp_path, spm_model, norm_first=True, positions="learned", layer_norm_eps=1e-6, d_k=4)
    with pytest.raises(AiaynError) as err:
        export_hf(tmp_path / "model", tmp_path / "hf")
    for part in ("pre-norm", "final LayerNorm", "learned positions", "layer_norm_eps=1e-06", "d_k=4, d_v=8"):
        assert part in str(err.value)
    assert main(["export-hf", str(tmp_path / "model"), str(tmp_path / "hf")]) == 2
    assert "Marian cannot express" in capsys.readouterr().err


def test_a_windowed_model_is_refused_in_one_line_before_any_writing(tmp_path, spm_model, capsys):
    """Marian, Transformers and CTranslate2 (which converts the export) have no restricted attention."""
    random_model(tmp_path, spm_model, attention_window=4)
    assert main(["export-hf", str(tmp_path / "model"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "attention_window=4" in err and "restricted to a window" in err
    assert not (tmp_path / "hf").exists()


def test_file_names_in_config_json_stay_inside_the_model_directory(tmp_path, spm_model, capsys):
    """A model directory from someone else cannot make export-hf copy a file of yours into its output."""
    random_model(tmp_path, spm_model)
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    config_path = tmp_path / "model" / "config.json"
    data = json.loads(config_path.read_text())
    for tokenizer in (
        {"type": "marian", "source": "spm.model", "target": "spm.model", "vocab": str(secret)},
        {"type": "sentencepiece", "model": "../id_ed25519"},
    ):
        config_path.write_text(json.dumps(data | {"tokenizer": tokenizer}))
        assert main(["export-hf", str(tmp_path / "model"), str(tmp_path / "hf")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "is not a plain file name" in err
    (tmp_path / "model" / "spm.model").unlink()
    (tmp_path / "model" / "spm.model").symlink_to(secret)
    config_path.write_text(json.dumps(data))
    with pytest.raises(AiaynError, match="'spm.model' is a link that leads outside"):
        export_hf(tmp_path / "model", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()  # built aside: a refused export writes nothing


def test_a_failed_export_leaves_the_previous_export_untouched(tmp_path, spm_model, monkeypatch):
    random_model(tmp_path, spm_model)
    export_hf(tmp_path / "model", tmp_path / "hf")
    before = {p.name: p.read_bytes() for p in (tmp_path / "hf").iterdir()}

    def fail(ids):  # after the weights and config.json are written into the new directory
        raise AiaynError("disk full")

    monkeypatch.setattr("aiayn.interop.hf_export.generation_config", fail)
    with pytest.raises(AiaynError, match="disk full"):
        export_hf(tmp_path / "model", tmp_path / "hf")
    assert {p.name: p.read_bytes() for p in (tmp_path / "hf").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".hf")] == []


@pytest.mark.parametrize(
    "tokenizer, damage, message",
    [
        ("bpe", None, r"config.json: unknown tokenizer type 'bpe'"),
        ("x", None, r"config.json: tokenizer must be an object, got 'x'"),
        ("marian", None, r"vocab.json: vocabulary file not found"),
        (None, "garbage", r"spm.model: not a SentencePiece model"),
    ],
)
def test_a_damaged_model_directory_is_one_line_before_any_writing(
    tmp_path, spm_model, capsys, tokenizer, damage, message
):
    random_model(tmp_path, spm_model)
    config_path = tmp_path / "model" / "config.json"
    data = json.loads(config_path.read_text())
    entry = {"bpe": {"type": "bpe"}, "x": "x", None: data["tokenizer"]}.get(tokenizer)
    if tokenizer == "marian":
        entry = {"type": "marian", "source": "spm.model", "target": "spm.model", "vocab": "vocab.json"}
    config_path.write_text(json.dumps(data | {"tokenizer": entry}))
    if damage:
        (tmp_path / "model" / "spm.model").write_text(damage)
    assert main(["export-hf", str(tmp_path / "model"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    "setup, message",
    [
        ("precious", r"hf exists and is not an earlier export \(it holds notes\.txt\); choose another"),
        ("aiayn model", r"hf exists and is not an earlier export \(it holds spm\.model\)"),
        ("bert", r"hf exists and is not an earlier export \(its config\.json is not a Marian model's\)"),
        ("file", r"hf exists and is not a directory"),
        ("itself", r"model: the output directory cannot be the model directory itself"),
    ],
)
def test_export_never_replaces_what_it_did_not_write(tmp_path, spm_model, setup, message):
    """The export replaces its output directory whole: a directory holding anything but an earlier
    export (or the model itself) is refused, and left as it was."""
    model = random_model(tmp_path, spm_model)
    out = tmp_path / "model" if setup == "itself" else tmp_path / "hf"
    if setup == "precious":
        export_hf(tmp_path / "model", out)
        (out / "notes.txt").write_text("mine")
    elif setup == "aiayn model":
        save_model_dir(model, out, spm_model.path)
    elif setup == "bert":
        out.mkdir()
        (out / "config.json").write_text('{"model_type": "bert"}')
    elif setup == "file":
        out.write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()} if out.is_dir() else out.read_bytes()
    with pytest.raises(AiaynError, match=message):
        export_hf(tmp_path / "model", out)
    assert ({p.name: p.read_bytes() for p in out.iterdir()} if out.is_dir() else out.read_bytes()) == before
    export_hf(tmp_path / "model", tmp_path / "empty")  # absent: written
    export_hf(tmp_path / "model", tmp_path / "empty")  # an earlier export: replaced
    assert (tmp_path / "empty" / "config.json").is_file()


def test_export_says_where_other_tools_would_translate_differently(tmp_path, spm_model, capsys):
    """CTranslate2 and Marian start the decoder from a zero vector: the export says when the model
    does not (a learned <s> start, or a <pad> start whose row is not zero); Transformers is exact."""
    model = random_model(tmp_path, spm_model)
    messages = []
    export_hf(tmp_path / "model", tmp_path / "hf", warn=messages.append)
    assert messages == []
    with torch.no_grad():
        model.tgt_embed.weight[model.config.pad_id] = 1.0
    save_model_dir(model, tmp_path / "model", spm_model.path)
    export_hf(tmp_path / "model", tmp_path / "hf", warn=messages.append)
    assert len(messages) == 1 and "row the decoder starts from is not zero" in messages[0]
    random_model(tmp_path, spm_model, decoder_start_id=None)
    assert main(["export-hf", str(tmp_path / "model"), str(tmp_path / "hf")]) == 0
    assert "aiayn export-hf: warning:" in capsys.readouterr().err
