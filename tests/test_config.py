"""aiayn.config, all in one place: ModelConfig presets (the models of configs/*.yaml, shipped with aiayn),
validation and serialisation (key=value overrides: test_overrides.py); and the one DecodeConfig,
whose defaults (the paper's section 6.1) are the only ones: the CLI, the server's schema and
Translator.translate_batch start from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from aiayn.config import ConfigError, DecodeConfig, ModelConfig, RunConfig, TrainConfig
from aiayn.configs import PRESETS, config_path, names
from aiayn.decode.texts import translate_texts
from aiayn.overrides import apply_overrides
from aiayn.serve.schemas import StreamRequest, TranslateRequest


def test_presets_are_the_papers():
    base = ModelConfig.preset("base", vocab_size=37000)
    assert (base.n_layers, base.d_model, base.d_ff, base.n_heads, base.dropout) == (6, 512, 2048, 8, 0.1)
    big = ModelConfig.preset("big")
    assert (big.d_model, big.d_ff, big.n_heads, big.dropout, big.key_dim) == (1024, 4096, 16, 0.3, 64)
    assert (big.d_k, big.d_v, big.value_dim) == (None, None, 64)  # d_model / h unless set (3.2.2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 100, "n_heads": 8}, "not divisible by n_heads"),
        ({"activation": "tanh"}, "activation='tanh'"),
        ({"dropout": 1.5}, "dropout must be in"),
        ({"src_vocab_size": 500}, "one shared vocabulary"),
        ({"pad_id": 9000}, "pad_id=9000 is outside"),
        ({"positions": "rotary"}, "positions='rotary'"),
        ({"d_k": 0}, "d_k must be positive or null, got 0"),
        ({"layer_norm_eps": float("nan")}, "layer_norm_eps must be a finite number >= 0, got nan"),
        ({"d_model": 100, "n_heads": 8, "d_k": 16}, "not divisible by n_heads=8 .d_k and d_v default"),
    ],
)
def test_invalid_configs_say_what_is_wrong(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**kwargs)
    with pytest.raises(ConfigError, match="unknown preset"):
        ModelConfig.preset("huge")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"log_every": 0}, "log_every must be positive, got 0"),
        ({"keep_last": 0}, "keep_last must be positive"),
        ({"update_tokens": -1}, "update_tokens must be positive"),
        ({"save_every": 0}, "save_every must be positive or null"),
        ({"max_steps": -1}, "max_steps must be 0 or more"),
        ({"warmup_steps": 0}, "warmup_steps must be positive"),
        ({"adam_beta1": 2.0}, r"adam_beta1 must be in \[0, 1\), got 2.0"),
        ({"adam_beta2": float("nan")}, r"adam_beta2 must be in \[0, 1\), got nan"),
        ({"lr_scale": -1.0}, "lr_scale must be a finite number > 0, got -1.0"),
        ({"lr_peak": 0.0}, "lr_peak must be a finite number > 0, or null, got 0.0"),
        ({"adam_eps": 0.0}, "adam_eps must be a finite number > 0, got 0.0"),
        ({"weight_decay": -0.1}, "weight_decay must be a finite number >= 0, got -0.1"),
        ({"clip_norm": -1.0}, "clip_norm must be a finite number > 0, or null, got -1.0"),
        ({"minutes": float("nan")}, "minutes must be a finite number >= 0, or null, got nan"),
        ({"save_minutes": float("inf")}, "save_minutes must be a finite number >= 0, or null, got inf"),
        ({"seed": -1}, r"seed must be an integer from 0 to 2\*\*63 - 1, got -1"),
        ({"seed": 2**63}, r"seed must be an integer from 0 to 2\*\*63 - 1, got 9223372036854775808"),
    ],
)
def test_invalid_training_settings_say_which(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)
    assert TrainConfig(max_steps=0, save_every=None).max_steps == 0  # 0 updates: only set the run up


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam_size": 0}, "beam_size must be between 1 and 1024, got 0"),
        ({"n_best": 5}, "n_best=5 must be between 1 and beam_size=4"),
        ({"n_best": 0, "sampling": True}, "n_best (samples) must be at least 1, got 0"),
        ({"alpha": float("nan")}, "alpha must be a finite number, got nan"),
        ({"max_len_a": float("inf")}, "max_len_a must be a finite number >= 0, got inf"),
        ({"max_len_a": -1.0}, "max_len_a must be a finite number >= 0, got -1.0"),
        ({"batch_tokens": 0}, "batch_tokens (--batch-tokens) must be at least 1, got 0"),
    ],
)
def test_invalid_decoding_settings_say_which(kwargs, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        DecodeConfig(**kwargs)
    assert DecodeConfig(alpha=0.0, max_len_a=0.0).max_len_a == 0.0  # no penalty, a fixed output length
    assert DecodeConfig(beam_size=1, n_best=5, sampling=True).n_best == 5  # samples need no beam


def test_dict_and_yaml_round_trip(tmp_path):
    run = RunConfig(model=ModelConfig.preset("tiny", norm_first=True), train=TrainConfig(warmup_steps=300))
    path = tmp_path / "config.yaml"
    run.to_yaml(path)
    assert RunConfig.from_yaml(path) == run
    with pytest.raises(ConfigError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"d_modle": 4})


@pytest.mark.parametrize(
    "text, message",
    [
        ("model:\n  d_model: [256\n", r"c\.yaml:3:1: invalid YAML: expected ',' or ']', but got"),
        ("model:\n  d_model: 256\n\tn_heads: 4\n", r"c\.yaml:3:1: invalid YAML: found character '\\t' that"),
        ("d_model: 256\n", r"c\.yaml: unknown config section\(s\): d_model \(the sections: model, train,"),
        ("model:\n  d_model: 250\n  n_heads: 4\n", r"c\.yaml: d_model=250 is not divisible by n_heads=4"),
    ],
)
def test_a_bad_config_file_names_the_file_and_the_line(tmp_path, text, message):
    """One line that says where: the file, and for a YAML syntax error its line and column."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path))}/{message}") as caught:
        RunConfig.from_yaml(path)
    assert "\n" not in str(caught.value)


def test_head_sizes_are_d_model_over_h_unless_both_are_set():
    c = ModelConfig(d_model=96, n_heads=4, d_k=16)
    assert (c.key_dim, c.value_dim) == (16, 24)
    c = ModelConfig(d_model=100, n_heads=8, d_k=16, d_v=12)  # no divisibility needed when both are set
    assert (c.key_dim, c.value_dim) == (16, 12)
    assert ModelConfig.from_dict(c.to_dict()) == c
    assert apply_overrides([ModelConfig()], ["d_k=32"])[0].key_dim == 32


def test_sampling_defaults_are_sampling_config_s(toy_model_dir):
    from aiayn.cli import build_parser
    from aiayn.cli.translate import controls_of
    from aiayn.config import SamplingConfig
    from aiayn.serve.schemas import Sample

    args = build_parser().parse_args(["translate", str(toy_model_dir), "--sample"])
    assert controls_of(args)["sample"] == SamplingConfig()
    assert SamplingConfig(**Sample().model_dump()) == SamplingConfig()
    assert TranslateRequest(text="x", sample={}).sample == Sample()


def test_the_server_schema_defaults_to_decode_config():
    assert TranslateRequest(text="x").search == DecodeConfig()
    assert StreamRequest(text="x").search == DecodeConfig()
    got = TranslateRequest(text="x", beam_size=8, alpha=0.2, n_best=3).search
    assert got == DecodeConfig(beam_size=8, alpha=0.2, n_best=3)


def test_replace_checks_names_and_values():
    with pytest.raises(ConfigError, match="beam: not a DecodeConfig field"):
        DecodeConfig().replace(beam=2)
    with pytest.raises(ConfigError, match="n_best=5 must be between 1 and beam_size=4"):
        DecodeConfig().replace(n_best=5)
    assert DecodeConfig().replace(beam_size=2) == DecodeConfig(beam_size=2)


def test_translate_takes_a_config_or_its_fields(toy_model_dir):
    from aiayn.decode.translator import Translator

    translator = Translator.load(toy_model_dir, device="cpu")
    texts = ["el perro come", "la casa grande"]
    options = DecodeConfig(beam_size=2, alpha=1.0)
    assert translate_texts(translator, texts, options) == translate_texts(
        translator, texts, beam_size=2, alpha=1.0
    )
    assert translate_texts(translator, texts) == translate_texts(translator, texts, DecodeConfig())
    with pytest.raises(ConfigError, match="beams: not a DecodeConfig field"):
        translate_texts(translator, texts, beams=2)


CONFIGS = Path(__file__).parent.parent / "configs"


def test_the_checkout_s_configs_are_the_package_s():
    """configs/ in a checkout is the folder the package ships and reads (aiayn/configs)."""
    shipped = {p.name: p.read_text() for p in config_path("tiny").parent.glob("*.yaml")}
    assert shipped == {p.name: p.read_text() for p in CONFIGS.glob("*.yaml")}
    assert sorted(shipped) == sorted(f"{name}.yaml" for name in names()) and set(PRESETS) < set(names())
    assert '"aiayn.configs" = ["*.yaml", "data/*.yaml"]' in (CONFIGS.parent / "pyproject.toml").read_text()


@pytest.mark.parametrize("name", PRESETS)
def test_presets_are_the_models_of_their_config_files(name):
    config = RunConfig.named(name)
    assert config == RunConfig.from_yaml(CONFIGS / f"{name}.yaml")
    assert ModelConfig.preset(name) == config.model
    assert "preset" not in yaml.safe_load(config_path(name).read_text())  # a preset is its own home
    if name != "tiny":  # the paper's recipe (5.3, 5.4)
        t = config.train
        assert (t.warmup_steps, t.label_smoothing, t.adam_beta2, t.adam_eps, t.lr_peak) == (
            4000,
            0.1,
            0.98,
            1e-9,
            None,
        )
    assert ModelConfig.preset(name, d_model=64, n_heads=2).d_model == 64


def test_the_presets_models():
    assert ModelConfig.preset("base") == ModelConfig()  # the defaults are the paper's base model
    tiny = ModelConfig.preset("tiny")
    assert (tiny.n_layers, tiny.d_model, tiny.d_ff, tiny.n_heads, tiny.dropout) == (3, 256, 1024, 4, 0.1)
    assert RunConfig.named("base") == RunConfig()


@pytest.mark.parametrize("name", names())
def test_a_named_config_writes_no_default(name):
    """One home per default: a named config lists only what differs from the dataclasses' defaults."""
    data = yaml.safe_load(config_path(name).read_text())
    defaults = {"model": ModelConfig(), "train": TrainConfig(), "decode": DecodeConfig()}
    for section, settings in data.items():
        if section == "preset":
            continue
        for key, value in (settings or {}).items():
            assert value != getattr(defaults[section], key), f"{name}.yaml: {section}.{key} is the default"


def test_a_config_file_can_start_from_a_preset(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("preset: tiny\nmodel:\n  dropout: 0.2\ntrain:\n  warmup_steps: 7\n")
    config = RunConfig.from_yaml(path)
    assert config.model == ModelConfig.preset("tiny", dropout=0.2) and config.train.warmup_steps == 7
    assert RunConfig.from_dict(config.to_dict()) == config  # written out whole, no preset needed
    for text, message in [
        ("preset: huge\n", "run.yaml: unknown preset 'huge'; choose one of tiny, base, big"),
        ("preset: tiny\nmodel: [1]\n", "run.yaml: ModelConfig settings must be a mapping, got list"),
        ("preset: tiny\nmodel:\n  d_model: '64'\n", "run.yaml: d_model must be an integer, got '64'"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(message)):
            RunConfig.from_yaml(path)
    with pytest.raises(
        ConfigError, match="no config named 'huge'; choose one of base, big, quickstart, student, tiny"
    ):
        RunConfig.named("huge")


def test_the_beam_and_the_temperature_are_bounded():
    """--beam 100000 used to allocate 10 GB and die, and a temperature of 1e-300 to blame the weights
    for scores that were not finite."""
    from aiayn.config import MAX_BEAM_SIZE, MIN_TEMPERATURE, SamplingConfig

    with pytest.raises(ConfigError, match=f"beam_size must be between 1 and {MAX_BEAM_SIZE}, got 100000"):
        DecodeConfig(beam_size=100_000)
    DecodeConfig(beam_size=MAX_BEAM_SIZE, n_best=1)
    with pytest.raises(
        ConfigError, match=f"temperature must be between {MIN_TEMPERATURE} and 100, got 1e-300"
    ):
        SamplingConfig(temperature=1e-300)
    SamplingConfig(temperature=MIN_TEMPERATURE)


def test_a_beam_wider_than_the_vocabulary_is_one_line(toy_model_dir, tmp_path, capsys):
    from aiayn.cli import main

    (tmp_path / "in.txt").write_text("el gato\n")
    assert main(["translate", str(toy_model_dir), "--beam", "1000", "-i", str(tmp_path / "in.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "beam_size 1000 is over the model's" in err, err
