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


def test_the_package_exports_the_python_api():
    from aiayn import ModelConfig as Config
    from aiayn import Transformer as Model
    from aiayn import Translator
    from aiayn.decode.translator import Translator as Real

    assert Model is Transformer and Config is ModelConfig and Translator is Real
