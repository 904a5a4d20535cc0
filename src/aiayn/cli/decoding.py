"""The search flags that `aiayn translate` and `aiayn evaluate` share, and the DecodeConfig they ask
for. A flag left out keeps the search's own value: DecodeConfig's defaults (section 6.1), or for parse
data section 6.3's (`aiayn.parse.parser.PARSE_DECODE`), so no default is restated here."""

from __future__ import annotations

import argparse
import sys

from aiayn.cli.options import add_device_option, add_renamed_option
from aiayn.config import LENGTH_PENALTY_STYLES, DecodeConfig
from aiayn.errors import AiaynError

# flag dest -> DecodeConfig field
SEARCH_FLAGS = {
    "beam": "beam_size",
    "draft_tokens": "draft_tokens",
    "alpha": "alpha",
    "length_penalty_style": "length_penalty_style",
    "max_len_a": "max_len_a",
    "max_len_b": "max_len_b",
    "batch_tokens": "batch_tokens",
    "shortlist": "shortlist",
}


def add_search_options(p: argparse.ArgumentParser) -> None:
    """--beam, --alpha, --length-penalty-style, --max-len-a/b, --batch-tokens, --device, --int8 and
    --shortlist."""
    d = DecodeConfig
    p.add_argument("--beam", type=int, help=f"beam size (default {d.beam_size}, the paper's; 1 = greedy)")
    p.add_argument("--alpha", type=float, help=f"length penalty exponent (default {d.alpha}, the paper's)")
    p.add_argument(
        "--length-penalty-style",
        choices=list(LENGTH_PENALTY_STYLES),
        help=f"{d.length_penalty_style} (default): ((5+|Y|)/6)^alpha (paper); len: |Y|^alpha as HF generate; "
        "fairseq: |Y|^alpha, stopping once beam-size hypotheses end (fairseq, CTranslate2)",
    )
    p.add_argument(
        "--max-len-a", type=float, help=f"output at most a*|source|+b tokens (default {d.max_len_a:g})"
    )
    p.add_argument("--max-len-b", type=int, help=f"see --max-len-a (default {d.max_len_b})")
    p.add_argument(
        "--batch-tokens",
        type=int,
        help=f"source tokens per decoding batch, padding counted (default {d.batch_tokens})",
    )
    add_renamed_option(p, "--max-tokens", "--batch-tokens", type=int)
    add_device_option(p)
    p.add_argument("--int8", action="store_true", help="int8 linear layers (dynamic quantisation; CPU only)")
    p.add_argument(
        "--shortlist",
        action="store_true",
        default=None,
        help="restrict the output layer to the model's shortlist (built by `aiayn shortlist`)",
    )


def add_draft_options(p: argparse.ArgumentParser, tokens: bool = True) -> None:
    """--draft (and --draft-tokens): speculative greedy search with a draft model."""
    p.add_argument(
        "--draft",
        metavar="DRAFT_MODEL",
        help="a smaller model with the same target vocabulary proposes tokens that the model checks in "
        "one pass: the model's greedy outputs, faster where the draft often agrees (implies --beam 1)",
    )
    if tokens:
        p.add_argument(
            "--draft-tokens",
            type=int,
            help=f"with --draft: tokens proposed per check (default {DecodeConfig.draft_tokens})",
        )


def add_target_option(p: argparse.ArgumentParser) -> None:
    """--to LANG: the target language of a multilingual model (aiayn.decode.languages)."""
    p.add_argument(
        "--to",
        metavar="LANG",
        help="the language to translate into, for a model of several target languages (one of those "
        "its config.json lists under target_languages)",
    )


def target_language(args: argparse.Namespace, info: dict) -> str | None:
    """--to, checked against the loaded model's languages: one line for a language it lacks, for
    --to on a model without tags (unless it names the model's own target language), and for no
    --to on a model of several target languages."""
    from aiayn.decode.languages import requested_target

    return requested_target(info, args.to, "--to")


def check_draft(args: argparse.Namespace) -> None:
    """One line for what a draft does not do: beam search, sampling, steered search, ensembles, a
    shortlist."""
    draft = getattr(args, "draft", None)
    if draft is None:
        if getattr(args, "draft_tokens", None) is not None:
            raise AiaynError("--draft-tokens needs --draft DRAFT_MODEL")
        return
    refused = [
        ("--beam > 1", (args.beam or 1) > 1),
        ("--sample", getattr(args, "sample", False)),
        ("--prefix-file", getattr(args, "prefix_file", None)),
        ("--constraints-file", getattr(args, "constraints_file", None)),
        ("several models", len(getattr(args, "model_dirs", [])) > 1),
        ("--shortlist", getattr(args, "shortlist", None)),
    ]
    for what, given in refused:
        if given:
            raise AiaynError(f"--draft speeds up greedy search of one model: not with {what}")


def decode_config(
    args: argparse.Namespace, n_best: int | None = None, base: DecodeConfig | None = None
) -> DecodeConfig:
    """`base` (default DecodeConfig()) with the search flags given and `n_best`; bad settings fail
    here, before any model loads. With --sample the beam plays no part: n_best samples are drawn
    whatever --beam says."""
    base = base or DecodeConfig()
    given = {field: getattr(args, dest, None) for dest, field in SEARCH_FLAGS.items()}
    given = {field: value for field, value in given.items() if value is not None}
    if n_best is not None:
        given["n_best"] = n_best
    if getattr(args, "sample", False):
        given["sampling"] = True  # n_best samples need no beam (DecodeConfig checks them so)
    check_draft(args)
    if getattr(args, "draft", None) is not None:
        given["beam_size"] = 1  # speculative decoding is greedy search
    return base.replace(**given)


def draft_summary(translator, options: DecodeConfig) -> None:
    """With a draft model, how often the model accepted its proposals (on stderr)."""
    if translator.bundle.draft is not None:
        print(translator.bundle.draft.stats.summary(options.draft_tokens), file=sys.stderr)
