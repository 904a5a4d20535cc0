"""The checks every config dataclass makes of its values (aiayn.config, the Vision Transformer's):
one-line ConfigErrors that name the setting, so that NaN, a negative rate or an impossible seed
never reaches training."""

from __future__ import annotations

import math
from typing import Any

from aiayn.errors import AiaynError


class ConfigError(AiaynError, ValueError):
    """A configuration value is invalid; the message says which and why."""


def check_choice(name: str, value: Any, choices: tuple) -> None:
    """A ConfigError unless `value` is one of `choices` (every config of aiayn's uses it)."""
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}")


def check_number(name: str, value: float | None, *, zero: bool = False, null: bool = False) -> None:
    """A ConfigError unless `value` is a finite number above 0 (or 0 itself with `zero`; None with
    `null`): NaN, infinities and negative rates, epsilons or budgets never reach training."""
    if value is None and null:
        return
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {bound}{', or null' if null else ''}, got {value}")


SEED_LIMIT = 2**63  # numpy's generators take seeds >= 0; torch.manual_seed takes 64 bits


def check_seed(name: str, value: int) -> None:
    """A ConfigError unless `value` is a seed every generator aiayn seeds (numpy, torch) takes."""
    if not 0 <= value < SEED_LIMIT:
        raise ConfigError(f"{name} must be an integer from 0 to 2**63 - 1, got {value}")
