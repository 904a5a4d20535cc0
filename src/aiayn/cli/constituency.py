"""Constituency parsing (section 6.3) in `aiayn prepare` and `aiayn evaluate`: the tree sources of
prepare, and the parseval branch of evaluate (searched as section 6.3 did, unless the flags say
otherwise: `aiayn.parse.parser.PARSE_DECODE`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.decoding import decode_config
from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.parse.treebank import SYNTHETIC


def add_tree_sources(source: argparse._MutuallyExclusiveGroup, p: argparse.ArgumentParser) -> None:
    """prepare's tree inputs (`source` is the group of corpus / --src / --tsv)."""
    source.add_argument(
        "--treebank", metavar="DIR", help="parse data from the WSJ Penn Treebank (sections 02-21 / 22 / 23)"
    )
    source.add_argument(
        "--trees-train", metavar="F", help="parse data: train trees (.mrg, one tree per line, or a directory)"
    )
    p.add_argument("--trees-valid", metavar="F", help="parse data: valid trees (else split off train)")
    p.add_argument("--trees-test", metavar="F", help="parse data: test trees (else split off train)")


def wants_trees(args: argparse.Namespace) -> bool:
    return bool(args.treebank or args.trees_train or args.trees_valid or args.trees_test) or (
        args.corpus == SYNTHETIC
    )


def run_prepare(args: argparse.Namespace) -> None:
    from aiayn.data.datadir import DataDir
    from aiayn.parse.prepare import prepare_trees

    text_only = {
        "--tgt": args.tgt, "--valid-src": args.valid_src, "--valid-tgt": args.valid_tgt,
        "--valid-tsv": args.valid_tsv, "--test-src": args.test_src, "--test-tgt": args.test_tgt,
        "--test-tsv": args.test_tsv, "--tgt-lang": args.tgt_lang, "--spm": args.spm,
        "--skip-bad-lines": args.skip_bad_lines,
    }  # fmt: skip
    given = [name for name, value in text_only.items() if value]
    if given:
        raise AiaynError(f"{', '.join(given)}: for parallel text, not for trees")
    out = prepare_trees(
        args.out,
        treebank=args.treebank,
        train=args.trees_train,
        valid=args.trees_valid,
        test=args.trees_test,
        synthetic={} if args.corpus == SYNTHETIC else None,
        src_lang=args.src_lang,
        vocab_size=args.vocab_size,
        max_len=args.max_len,
        train_limit=args.train_limit,
        seed=args.seed,
        force=args.force,
        progress=not args.no_progress,
    )
    data = DataDir(out)
    meta, (trees, dropped) = data.meta, data.counts()
    print(
        f"{out}: parse trees ({meta['corpus']}), {trees} trees, {len(meta['parse']['labels'])} labels, "
        f"vocabulary {meta['vocab_size']:,}, {dropped:,} trees dropped (see meta.json)"
    )


def add_evaluate_options(p: argparse.ArgumentParser) -> None:
    """--metric and --baseline (the search flags are translate's: aiayn.cli.decoding)."""
    p.add_argument(
        "--metric",
        choices=["bleu", "parseval"],
        help="bleu (BLEU and chrF; the default for text) or parseval (labelled bracketing F1, EVALB "
        "with COLLINS.prm; the default for parse data)",
    )
    p.add_argument(
        "--baseline",
        choices=["right-branching"],
        help="score this baseline on DATA_DIR (parse data) instead of a model",
    )


def wants_parseval(args: argparse.Namespace) -> bool:
    from aiayn.data.datadir import DataDir

    if args.metric is not None or args.baseline:
        return args.metric == "parseval" or bool(args.baseline)
    data = DataDir(args.data_dir) if args.data_dir else None
    return data is not None and data.prepared and data.is_parse


def run_evaluate(args: argparse.Namespace) -> None:
    """The parseval branch: --hyp/--ref trees, --baseline, or MODEL_DIR on parse DATA_DIR (searched
    with section 6.3's settings and the search flags given)."""
    from aiayn.cli.options import evaluate_on_split
    from aiayn.parse.evaluate import evaluate_baseline, evaluate_parser, evaluate_tree_files
    from aiayn.parse.parser import PARSE_DECODE

    if args.hyp or args.ref:
        if not (args.hyp and args.ref) or args.model_dir or args.data_dir or args.baseline:
            raise AiaynError("give either MODEL_DIR DATA_DIR, or --hyp F --ref F")
        scores = evaluate_tree_files(args.hyp, args.ref)
        if args.out:
            from aiayn.evaluate import write_scores

            write_scores(scores, args.out)
    elif args.baseline:
        data_dir = args.data_dir or args.model_dir
        if not data_dir or (args.model_dir and args.data_dir):
            raise AiaynError(
                "--baseline takes DATA_DIR alone: aiayn evaluate DATA_DIR --baseline right-branching"
            )
        scores = evaluate_baseline(data_dir, args.split, args.out, args.limit)
    else:
        if not (args.model_dir and args.data_dir):
            raise AiaynError("give MODEL_DIR DATA_DIR (or --hyp F --ref F)")
        scores = evaluate_on_split(
            evaluate_parser, args, decode_config(args, base=DecodeConfig(**PARSE_DECODE))
        )
    if args.out:
        scores["scores"] = str(Path(args.out) / "scores.json")
    print(scores["parseval_text"])
    for key in ("hypotheses", "scores"):
        if key in scores:
            print(f"{key}: {scores[key]}")
