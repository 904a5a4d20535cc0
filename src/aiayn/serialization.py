"""to/from dict and YAML for aiayn's settings dataclasses: every value type-checked against its field,
every error naming the file (and a YAML syntax error its line and column), files written atomically.
`aiayn.config`'s dataclasses and the Vision Transformer's (aiayn.vision) are `Serializable`."""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from aiayn.checks import ConfigError
from aiayn.safe_io import atomic_write_text

_PLAIN = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}


def _kinds(hint: Any) -> tuple[type, ...] | None:
    """The plain types a field of type `hint` takes (int | None -> (int, NoneType)); None: not checked."""
    kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return kinds if all(k in _PLAIN for k in kinds) else None


def _typed(name: str, hint: Any, value: Any) -> Any:
    """`value` if it has the field's type (ints pass for floats; bools only for bools), else a ConfigError."""
    kinds = _kinds(hint)
    if kinds is None:
        return value
    if float in kinds and isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    ok = (
        isinstance(value, bool)
        and bool in kinds
        or not isinstance(value, bool)
        and (type(value) in kinds or (type(value) is int and float in kinds))
    )
    if not ok:
        raise ConfigError(f"{name} must be {' or '.join(_PLAIN[k] for k in kinds)}, got {value!r}")
    return value


class Serializable:
    """to/from dict and YAML for the config dataclasses (these and the Vision Transformer's)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """The config of a mapping of settings; each value must have its field's type (an int field
        takes no "512" or 512.0, a float field takes ints, and a numeric string: YAML 1.1 reads 1e-9
        as text)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.__name__} settings must be a mapping, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
        hints = typing.get_type_hints(cls)
        return cls(**{name: _typed(name, hints[name], value) for name, value in data.items()})

    def to_yaml(self, path: str | Path) -> None:
        """Write atomically (temporary file, fsync, rename): a crash leaves the old file whole."""
        atomic_write_text(path, yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def from_yaml(cls, path: str | Path):
        """Read a YAML mapping; an empty file is an error, never silently the defaults. Every error
        names the file, and a YAML syntax error its line and column."""
        data = load_yaml(path)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a YAML mapping of settings, found {type(data).__name__}")
        try:
            return cls.from_dict(data)
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}") from None

    def replace(self, **changes):
        """A copy with `changes` (field names) applied and checked; an unknown name is a ConfigError."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            names = ", ".join(f.name for f in fields(self))
            raise ConfigError(f"{', '.join(unknown)}: not a {type(self).__name__} field ({names})")
        return dataclasses.replace(self, **changes)


def load_yaml(path: str | Path) -> Any:
    """A YAML file's contents; a syntax error is a ConfigError naming file:line:column and the problem,
    an unreadable or non-UTF-8 file one naming the file."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read it as YAML: {reason}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{_yaml_error_place(path, err)}: invalid YAML: {_yaml_problem(err)}") from None


def _yaml_error_place(path: str | Path, err: yaml.YAMLError) -> str:
    """path:line:column of a YAML syntax error (1-based), or the path alone when YAML has no mark."""
    mark = getattr(err, "problem_mark", None)
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What YAML found wrong, in one line: its problem and the construct it was reading."""
    problem, context = getattr(err, "problem", None), getattr(err, "context", None)
    if not problem:
        return str(err).splitlines()[0]
    return f"{problem} ({context})" if context else problem
