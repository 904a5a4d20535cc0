"""ModelConfig presets, validation, serialisation and key=value overrides."""

import pytest

from aiayn.config import ConfigError, DecodeConfig, ModelConfig, RunConfig, TrainConfig, apply_overrides


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
    ],
)
def test_invalid_training_settings_say_which(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)
    assert TrainConfig(max_steps=0, save_every=None).max_steps == 0  # 0 updates: only set the run up


def test_dict_and_yaml_round_trip(tmp_path):
    run = RunConfig(model=ModelConfig.preset("tiny", norm_first=True), train=TrainConfig(warmup_steps=300))
    path = tmp_path / "config.yaml"
    run.to_yaml(path)
    assert RunConfig.from_yaml(path) == run
    with pytest.raises(ConfigError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"d_modle": 4})


def test_overrides_find_their_config_and_parse_types():
    model, train, decode = apply_overrides(
        [ModelConfig(), TrainConfig(), DecodeConfig()],
        ["d_model=64", "n_heads=4", "warmup_steps=300", "norm_first=true", "clip_norm=none", "alpha=1.0"],
    )
    got = (model.d_model, model.norm_first, train.warmup_steps, train.clip_norm, decode.alpha)
    assert got == (64, True, 300, None, 1.0)
    with pytest.raises(ConfigError, match="no such setting"):
        apply_overrides([ModelConfig()], ["dmodel=3"])
    with pytest.raises(ConfigError, match="expected int"):
        apply_overrides([ModelConfig()], ["d_model=big"])
    with pytest.raises(ConfigError, match="not divisible"):
        apply_overrides([ModelConfig()], ["n_heads=7"])


def test_head_sizes_are_d_model_over_h_unless_both_are_set():
    c = ModelConfig(d_model=96, n_heads=4, d_k=16)
    assert (c.key_dim, c.value_dim) == (16, 24)
    c = ModelConfig(d_model=100, n_heads=8, d_k=16, d_v=12)  # no divisibility needed when both are set
    assert (c.key_dim, c.value_dim) == (16, 12)
    assert ModelConfig.from_dict(c.to_dict()) == c
    assert apply_overrides([ModelConfig()], ["d_k=32"])[0].key_dim == 32
