"""`--set key=value` (aiayn.overrides): each key finds the config that owns it, values are parsed
into the field's type, and a bad key, value or form is a one-line ConfigError naming the setting."""

import pytest

from aiayn.config import ConfigError, DecodeConfig, ModelConfig, TrainConfig
from aiayn.overrides import apply_overrides


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
    assert apply_overrides([ModelConfig()], ["tie_embeddings=none"])[0].tie_embeddings == "none"  # a word
    for setting in ("warmup_steps=null", "d_model=none", "seed=null"):  # null only where a field takes it
        with pytest.raises(
            ConfigError, match=rf"^--set {setting.split('=')[0]}: null is not a value of this"
        ):
            apply_overrides([ModelConfig(), TrainConfig()], [setting])


@pytest.mark.parametrize(
    "raw, value", [("true", True), ("On", True), ("1", True), ("no", False), ("OFF", False)]
)
def test_booleans_take_the_usual_words(raw, value):
    assert apply_overrides([ModelConfig()], [f"norm_first={raw}"])[0].norm_first is value


def test_a_key_belongs_to_the_config_that_has_it_and_the_others_are_kept():
    model, train = ModelConfig(), TrainConfig()
    new_model, new_train = apply_overrides([model, train], [" warmup_steps = 7 "])
    assert new_model is model and new_train.warmup_steps == 7 and train.warmup_steps != 7


@pytest.mark.parametrize(
    "item, message",
    [
        ("d_model", r"^override 'd_model' is not of the form key=value$"),
        ("=3", r"^override '=3' is not of the form key=value$"),
        ("norm_first=maybe", r"^--set norm_first: expected true/false, got 'maybe'$"),
        ("nope=1", r"^--set nope: no such setting; known: .*\balpha\b.*\bd_model\b"),
    ],
)
def test_bad_overrides_are_one_line_errors(item, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides([ModelConfig(), DecodeConfig()], [item])
