"""Settings dataclasses to and from dicts and YAML (aiayn.serialization): every value checked
against its field's type, every error one line naming the file (and a syntax error's line and
column), the YAML written back read as it was."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from aiayn.checks import ConfigError
from aiayn.serialization import Serializable, load_yaml


@dataclass(frozen=True)
class Settings(Serializable):
    steps: int = 10
    rate: float = 0.5
    name: str = "run"
    fast: bool = False
    limit: int | None = None
    anything: list | None = None  # not a plain type: not checked


def test_values_of_the_fields_types_pass_and_others_are_named():
    assert Settings.from_dict({"steps": 3, "rate": 2, "limit": None}) == Settings(steps=3, rate=2)
    assert Settings.from_dict({"rate": "1e-9"}).rate == 1e-9  # YAML 1.1 reads 1e-9 as text
    assert Settings.from_dict({"anything": {"a": 1}}).anything == {"a": 1}
    for data, message in (
        ({"steps": "512"}, r"^steps must be an integer, got '512'$"),
        ({"steps": 512.0}, r"^steps must be an integer, got 512.0$"),
        ({"steps": True}, r"^steps must be an integer, got True$"),
        ({"fast": 1}, r"^fast must be true or false, got 1$"),
        ({"limit": "x"}, r"^limit must be an integer or null, got 'x'$"),
        ({"rate": "fast"}, r"^rate must be a number, got 'fast'$"),
        ({"step": 1, "zz": 2}, r"^unknown Settings field\(s\): step, zz$"),
        ([1], r"^Settings settings must be a mapping, got list$"),
    ):
        with pytest.raises(ConfigError, match=message):
            Settings.from_dict(data)


def test_replace_checks_the_names():
    assert Settings().replace(steps=4).steps == 4
    with pytest.raises(ConfigError, match=r"^stepz: not a Settings field \(steps, rate, name,"):
        Settings().replace(stepz=4)


def test_yaml_round_trip_and_errors_naming_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    settings = Settings(steps=7, rate=0.25, name="x y", fast=True, limit=3, anything=[1, "a"])
    settings.to_yaml(path)
    where = re.escape(str(path))
    assert Settings.from_yaml(path) == settings and load_yaml(path)["name"] == "x y"
    path.write_text("steps: 1\nrate: [1, 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{where}:3:1: invalid YAML: expected ',' or '\]'"):
        Settings.from_yaml(path)
    path.write_text("steps: two\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{where}: steps must be an integer, got 'two'$"):
        Settings.from_yaml(path)
    for content in ("", "- 1\n"):
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ConfigError, match=rf"^{where}: expected a YAML mapping of settings, found"):
            Settings.from_yaml(path)
    path.write_bytes(b"steps: \xff\n")
    with pytest.raises(ConfigError, match=rf"^{where}: cannot read it as YAML: not UTF-8 text$"):
        load_yaml(path)
    with pytest.raises(ConfigError, match=r"cannot read it as YAML: No such file"):
        load_yaml(tmp_path / "absent.yaml")
