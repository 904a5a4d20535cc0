"""Issue 17 item 1: the decoding options travel as one DecodeConfig, whose defaults (the paper's
section 6.1) are the only ones: the CLI, the server's schema and Translator.translate start from it."""

from __future__ import annotations

import argparse

import pytest

from aiayn.cli import _add_search_options, _decode_config
from aiayn.config import ConfigError, DecodeConfig
from aiayn.serve.schemas import StreamRequest, TranslateRequest


def test_the_cli_flags_default_to_decode_config():
    parser = argparse.ArgumentParser()
    _add_search_options(parser)
    assert _decode_config(parser.parse_args([])) == DecodeConfig()
    args = parser.parse_args(["--beam", "6", "--alpha", "1.0", "--length-penalty-style", "fairseq"])
    assert _decode_config(args, n_best=2) == DecodeConfig(
        beam_size=6, alpha=1.0, length_penalty_style="fairseq", n_best=2
    )


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
    assert translator.translate(texts, options) == translator.translate(texts, beam_size=2, alpha=1.0)
    assert translator.translate(texts) == translator.translate(texts, DecodeConfig())
    with pytest.raises(ConfigError, match="beams: not a DecodeConfig field"):
        translator.translate(texts, beams=2)
