"""The value checks every config makes (aiayn.checks): one-line ConfigErrors naming the setting."""

import math

import pytest

from aiayn.checks import SEED_LIMIT, ConfigError, check_choice, check_number, check_seed
from aiayn.errors import AiaynError


def test_a_config_error_is_an_aiayn_error_and_a_value_error():
    assert issubclass(ConfigError, AiaynError) and issubclass(ConfigError, ValueError)


def test_a_choice_outside_the_choices_lists_them():
    check_choice("norm", "pre", ("pre", "post"))
    with pytest.raises(ConfigError, match=r"^norm='mid' is not one of 'pre', 'post'$"):
        check_choice("norm", "mid", ("pre", "post"))


@pytest.mark.parametrize("value", [1e-9, 3, 0.5])
def test_positive_finite_numbers_pass(value):
    check_number("lr", value)


@pytest.mark.parametrize(
    "value, options, message",
    [
        (0, {}, r"^lr must be a finite number > 0, got 0$"),
        (-1, {"zero": True}, r"^lr must be a finite number >= 0, got -1$"),
        (math.nan, {}, r"^lr must be a finite number > 0, got nan$"),
        (math.inf, {"zero": True, "null": True}, r"^lr must be a finite number >= 0, or null, got inf$"),
        (None, {}, r"^lr must be a finite number > 0, got None$"),
    ],
)
def test_bad_numbers_say_the_bound(value, options, message):
    with pytest.raises(ConfigError, match=message):
        check_number("lr", value, **options)


def test_zero_and_none_pass_only_when_allowed():
    check_number("clip", 0, zero=True)
    check_number("clip", None, null=True)


@pytest.mark.parametrize("seed", [-1, SEED_LIMIT])
def test_seeds_outside_what_numpy_and_torch_take_are_refused(seed):
    check_seed("seed", 0)
    check_seed("seed", SEED_LIMIT - 1)
    with pytest.raises(ConfigError, match=rf"^seed must be an integer from 0 to 2\*\*63 - 1, got {seed}$"):
        check_seed("seed", seed)
