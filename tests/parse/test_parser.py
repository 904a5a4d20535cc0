"""Parsing as translation (aiayn.parse.parser): which model directories are parsers, and the search
of section 6.3. Parses themselves are checked end to end in tests/scenarios/test_parse_end_to_end.py."""

from __future__ import annotations

import pytest

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.parse.parser import PARSE_DECODE, Parser, parse_info


def test_a_parser_s_labels_are_read_from_its_task():
    assert parse_info({"task": "parse", "parse": {"labels": ["S", "NP"]}}, "x") == ["S", "NP"]
    for info in ({}, {"task": "translate", "parse": {"labels": ["S"]}}, {"task": "parse", "parse": {}}):
        with pytest.raises(
            AiaynError, match=r'^m/config.json: not a parser \(no "task": "parse" with its labels\)$'
        ):
            parse_info(info, "m/config.json")


def test_a_translator_is_no_parser(toy_model_dir, translator):
    with pytest.raises(AiaynError, match=rf"^{toy_model_dir / 'config.json'}: not a parser"):
        Parser.load(toy_model_dir, device="cpu")
    with pytest.raises(AiaynError, match=r"^the model's vocabulary has no tree token '\(S': not a parser"):
        Parser(translator, ["S", "NP"])


def test_the_search_is_section_6_3_s():
    search = DecodeConfig(**PARSE_DECODE)
    assert (search.beam_size, search.alpha, search.max_len_a, search.max_len_b) == (21, 0.3, 1.0, 300)
