"""The model directory: safetensors weights (tied ones stored once) and config.json."""

import json

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.errors import AiaynError
from aiayn.model import Transformer
from aiayn.model.io import load_model_dir, save_model_dir


def test_round_trip_keeps_weights_tying_and_info(tmp_path):
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    (tmp_path / "spm.model").write_bytes(b"not really a model")
    out = save_model_dir(model, tmp_path / "m", tmp_path / "spm.model", src_lang="es", tgt_lang="en")
    loaded, info = load_model_dir(out)
    assert info["src_lang"] == "es" and info["tokenizer"]["model"] == "spm.model"
    assert (out / "spm.model").read_bytes() == b"not really a model"
    assert loaded.config == model.config and not loaded.training
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert loaded.src_embed.weight is loaded.output_weight


def test_bad_model_directories_say_what_is_wrong(tmp_path):
    with pytest.raises(AiaynError, match="not a model directory"):
        load_model_dir(tmp_path)
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    out = save_model_dir(model, tmp_path / "m")
    data = json.loads((out / "config.json").read_text())
    data["model"]["d_model"] = 32
    (out / "config.json").write_text(json.dumps(data))
    with pytest.raises(AiaynError, match="weights do not match config.json"):
        load_model_dir(out)
    (out / "config.json").write_text("{\n  oops")
    with pytest.raises(AiaynError, match=r"config.json:2: invalid JSON"):
        load_model_dir(out)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d["model"].update(d_model="16"),
            r"model config: d_model must be an integer, got '16'",
        ),
        (lambda d: d["model"].update(n_layers=None), r"n_layers must be an integer, got None"),
        (lambda d: d["model"].update(dropout=True), r"dropout must be a number, got True"),
        (lambda d: d.pop("model"), r'config.json: no "model" settings'),
        (lambda d: d.update(model=[1, 2]), r"ModelConfig settings must be a mapping, got list"),
    ],
)
def test_a_config_json_with_wrong_types_names_the_field(tmp_path, edit, message):
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    out = save_model_dir(model, tmp_path / "m")
    data = json.loads((out / "config.json").read_text())
    edit(data)
    (out / "config.json").write_text(json.dumps(data))
    with pytest.raises(AiaynError, match=message):
        load_model_dir(out)


def test_a_config_json_that_is_not_an_object_or_has_a_bad_tokenizer_entry(tmp_path, toy_model_dir):
    from aiayn.decode.translator import Translator

    out = tmp_path / "m"
    out.mkdir()
    (out / "config.json").write_text("[1, 2]")
    with pytest.raises(AiaynError, match=r"config.json: expected a JSON object of settings, found list"):
        load_model_dir(out)
    for name in ("model.safetensors", "spm.model"):
        (out / name).write_bytes((toy_model_dir / name).read_bytes())
    data = json.loads((toy_model_dir / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**data, "tokenizer": "spm"}))
    with pytest.raises(AiaynError, match=r"config.json: tokenizer must be an object, got 'spm'"):
        Translator.load(out, "cpu")


def test_the_package_exports_the_python_api():
    from aiayn import ModelConfig as Config
    from aiayn import Transformer as Model
    from aiayn import Translator
    from aiayn.decode.translator import Translator as Real

    assert Model is Transformer and Config is ModelConfig and Translator is Real


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(vocab_size=10**12), r"\(vocab_size=1000000000000\): output_weight is \(50, 16\) there"),
        (dict(n_layers=100_000), r"\(n_layers=100000\): they hold 1 encoder layers"),
        (dict(n_decoder_layers=3), r"\(n_decoder_layers=3\): they hold 1 decoder layers"),
        (dict(d_ff=10**9), r"\(d_ff=1000000000\): encoder.layers.0.ffn.linear1.weight is \(32, 16\) there"),
        (dict(final_logits_bias=True), r"no tensor output_bias"),
    ],
)
def test_a_config_that_does_not_fit_its_weights_is_refused_before_allocating(tmp_path, change, message):
    """config.json from someone else: checked against the safetensors header, never built first."""
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    out = save_model_dir(model, tmp_path / "m")
    data = json.loads((out / "config.json").read_text())
    data["model"].update(change)
    (out / "config.json").write_text(json.dumps(data))
    with pytest.raises(
        AiaynError, match=rf"^{out / 'model.safetensors'}: weights do not match config.json.*{message}"
    ):
        load_model_dir(out)


def test_an_interrupted_rewrite_of_a_model_directory_leaves_whole_files(tmp_path, run_python):
    """A full disk while `aiayn average` rewrites a model directory: every file is old or new, whole."""
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    (tmp_path / "old.model").write_bytes(b"old" * 40_000)
    out = save_model_dir(model, tmp_path / "m", tmp_path / "old.model")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tmp_path / "new.model").write_bytes(b"new" * 40_000)
    limit = (out / "model.safetensors").stat().st_size + 1000  # the weights fit, the tokenizer does not
    printed = run_python(
        "from aiayn.model.io import load_model_dir, save_model_dir\n"
        f"model, _ = load_model_dir({str(out)!r})\n"
        f"limit_files({limit})\n"
        f"try:\n    save_model_dir(model, {str(out)!r}, {str(tmp_path / 'new.model')!r})\n"
        "except OSError as err:\n    print('failed', err.errno)\n"
    )
    assert printed.startswith("failed")
    assert (out / "spm.model").read_bytes() == before["spm.model"]
    assert (out / "config.json").read_bytes() == before["config.json"]
    assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no temporary file left
    load_model_dir(out)


def test_integer_weights_are_refused_at_load(tmp_path):
    """int32 tensors used to load, be cast, and translate garbage: refused now."""
    from safetensors.torch import load_file, save_file

    model = Transformer(ModelConfig(vocab_size=40, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    out = save_model_dir(model, tmp_path / "m")
    weights = load_file(str(out / "model.safetensors"))
    name = next(iter(weights))
    weights[name] = weights[name].round().to(torch.int32)
    save_file(weights, str(out / "model.safetensors"))
    with pytest.raises(AiaynError, match=rf"model.safetensors: {name} holds I32 numbers, not floating point"):
        load_model_dir(out)


def test_loading_a_model_directory_imports_no_compiler(tmp_path, run_python):
    """`check_fits` builds the model on the meta device; drawing weights there would import
    torch._dynamo (~2 s of every `aiayn translate` or `serve` start)."""
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1))
    (tmp_path / "spm.model").write_bytes(b"x")
    out = save_model_dir(model, tmp_path / "m", tmp_path / "spm.model")
    printed = run_python(
        "import sys\nfrom aiayn.model.io import load_model_dir\n"
        f"load_model_dir({str(out)!r})\nprint('torch._dynamo' in sys.modules)\n"
    )
    assert printed.strip() == "False"
