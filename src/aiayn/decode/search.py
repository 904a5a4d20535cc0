"""Deprecated: the strategies are aiayn.decode.strategies (each taking a `SearchRules`), what they
share aiayn.decode.rules. The old names here keep working for a deprecation period, with a
DeprecationWarning: `greedy_search`, `beam_search` (the fields of `SearchRules` as keywords), and
`Hypothesis`, `Prefixes`, `SearchStopped`, `Stepper`, `StopHook`, `STYLES`, `length_penalty`.
"""

from __future__ import annotations

import warnings
from typing import Any

from torch import Tensor

from aiayn.decode import rules as rules_module
from aiayn.decode import strategies

MOVED = ("Hypothesis", "Prefixes", "SearchStopped", "Stepper", "StopHook", "STYLES", "length_penalty")


def _greedy_search(stepper, max_lens: Tensor, **rules: Any):
    """`strategies.greedy_search` with the fields of `SearchRules` as keywords."""
    return strategies.greedy_search(stepper, max_lens, rules_module.SearchRules(**rules))


def _beam_search(stepper, max_lens: Tensor, *, beam_size: int, n_best: int = 1, **rules: Any):
    """`strategies.beam_search` with the fields of `SearchRules` as keywords."""
    found = rules_module.SearchRules(**rules)
    return strategies.beam_search(stepper, max_lens, found, beam_size=beam_size, n_best=n_best)


def _sample_search(stepper, max_lens: Tensor, keys: Tensor, *, samples: int, sampling, **rules: Any):
    """`strategies.sample_search` with the fields of `SearchRules` as keywords."""
    found = rules_module.SearchRules(**rules)
    return strategies.sample_search(stepper, max_lens, found, keys, samples=samples, sampling=sampling)


def _constrained_beam_search(
    stepper, max_lens: Tensor, constraints, *, beam_size: int, n_best: int = 1, **rules
):
    """`strategies.constrained_beam_search` with the fields of `SearchRules` as keywords."""
    found = rules_module.SearchRules(**rules)
    return strategies.constrained_beam_search(
        stepper, max_lens, found, constraints, beam_size=beam_size, n_best=n_best
    )


OLD = {"greedy_search": _greedy_search, "beam_search": _beam_search}  # their old signatures
OLD_ENTRIES = {"sample_search": _sample_search, "constrained_beam_search": _constrained_beam_search}


def deprecated(module: str, name: str, new: str, value):
    """`value`, with the DeprecationWarning that `module.name` is `new` now."""
    warnings.warn(f"{module}.{name} is deprecated: it is {new} now", DeprecationWarning, stacklevel=3)
    return value


def __getattr__(name: str):
    if name in MOVED:
        return deprecated(__name__, name, f"aiayn.decode.rules.{name}", getattr(rules_module, name))
    if name in OLD:
        return deprecated(__name__, name, f"aiayn.decode.strategies.{name} (given a SearchRules)", OLD[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
