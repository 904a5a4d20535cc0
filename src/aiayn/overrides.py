"""`--set key=value`: command-line overrides of the config dataclasses' fields by their plain names
(unique across the configs given), each parsed into the type its field is annotated with."""

from __future__ import annotations

import typing
from typing import Any

from aiayn.config import ConfigError


def _parse_value(raw: str, annotation: Any) -> Any:
    """Parse a command-line string into the type a dataclass field is annotated with."""
    nullable = type(None) in typing.get_args(annotation)
    if raw.lower() in ("none", "null") and annotation is not str:  # tie_embeddings=none is a word
        if nullable:
            return None
        raise ConfigError(
            f"null is not a value of this setting (it takes {getattr(annotation, '__name__', annotation)})"
        )
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if args else annotation
    if base is bool:
        if raw.lower() in ("true", "1", "yes", "on"):
            return True
        if raw.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"expected true/false, got {raw!r}")
    try:
        return base(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"expected {base.__name__}, got {raw!r}") from None


def apply_overrides(configs: list[Any], overrides: list[str]) -> list[Any]:
    """Apply `key=value` strings to whichever config owns `key` (names are unique across configs)."""
    configs = list(configs)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        for i, cfg in enumerate(configs):
            hints = typing.get_type_hints(type(cfg))
            if key in hints:
                try:
                    value = _parse_value(raw.strip(), hints[key])
                except ConfigError as err:
                    raise ConfigError(f"--set {key}: {err}") from None
                configs[i] = cfg.replace(**{key: value})
                break
        else:
            known = sorted(n for cfg in configs for n in typing.get_type_hints(type(cfg)))
            raise ConfigError(f"--set {key}: no such setting; known: {', '.join(known)}")
    return configs
