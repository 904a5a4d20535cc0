"""The search options of translate, evaluate and serve (aiayn.cli.decoding): flags to a
DecodeConfig, field by field, and what a draft model refuses."""

from __future__ import annotations

import argparse

import pytest

from aiayn.cli import build_parser
from aiayn.cli.decoding import add_search_options, decode_config
from aiayn.config import ConfigError, DecodeConfig
from aiayn.errors import AiaynError


def test_the_cli_flags_default_to_decode_config():
    parser = argparse.ArgumentParser()
    add_search_options(parser)
    assert decode_config(parser.parse_args([])) == DecodeConfig()
    args = parser.parse_args(["--beam", "6", "--alpha", "1.0", "--length-penalty-style", "fairseq"])
    assert decode_config(args, n_best=2) == DecodeConfig(
        beam_size=6, alpha=1.0, length_penalty_style="fairseq", n_best=2
    )


def test_flags_left_out_keep_the_base_search():
    """The flags change a base field by field: DecodeConfig(), or the parsing search of section 6.3."""
    from aiayn.parse.parser import PARSE_DECODE

    parser = argparse.ArgumentParser()
    add_search_options(parser)
    parsing = DecodeConfig(**PARSE_DECODE)
    assert decode_config(parser.parse_args([]), base=parsing) == parsing
    args = parser.parse_args(["--beam", "5", "--batch-tokens", "99"])
    assert decode_config(args, base=parsing) == parsing.replace(beam_size=5, batch_tokens=99)
    with pytest.raises(ConfigError, match="n_best=7 must be between 1 and beam_size=5"):
        decode_config(args, n_best=7)
    args.sample = True  # n_best samples need no beam: --beam stays as given, unused
    sampled = decode_config(args, n_best=7)
    assert (sampled.sampling, sampled.n_best, sampled.beam_size) == (True, 7, 5)


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_max_tokens_is_the_deprecated_spelling_of_batch_tokens(command, capsys):
    """--batch-tokens is DecodeConfig.batch_tokens; --max-tokens (train's word for another thing)
    still works in translate and evaluate and says, in one line, that it is deprecated."""
    parser = build_parser()
    assert decode_config(parser.parse_args([command, "M", "--batch-tokens", "77"])).batch_tokens == 77
    assert capsys.readouterr().err == ""
    assert decode_config(parser.parse_args([command, "M", "--max-tokens", "66"])).batch_tokens == 66
    err = capsys.readouterr().err
    assert err == f"aiayn {command}: --max-tokens is deprecated; use --batch-tokens\n"
    assert "--max-tokens" not in parser.parse_args([command, "M"]).subcommands[command].format_help()


@pytest.mark.parametrize(
    "flags, message",
    [(["--beam", "4"], "not with --beam > 1"), (["--sample"], "not with --sample"),
     (["--prefix-file", "p.txt"], "not with --prefix-file"), (["--shortlist"], "not with --shortlist")],
)  # fmt: skip
def test_a_draft_speeds_up_greedy_search_of_one_model_only(flags, message):
    args = build_parser().parse_args(["translate", "M", "--draft", "D", *flags])
    with pytest.raises(AiaynError, match=rf"^--draft speeds up greedy search of one model: {message}$"):
        decode_config(args)
    plain = build_parser().parse_args(["translate", "M", "--draft", "D"])
    assert decode_config(plain).beam_size == 1  # speculative decoding is greedy search
    with pytest.raises(AiaynError, match=r"^--draft-tokens needs --draft DRAFT_MODEL$"):
        decode_config(build_parser().parse_args(["translate", "M", "--draft-tokens", "3"]))
