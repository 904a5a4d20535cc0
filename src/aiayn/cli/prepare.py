"""`aiayn prepare`: a built-in corpus or the user's parallel text (or trees: aiayn.cli.constituency)
into a data directory, through the typed `aiayn.data.prepare.prepare`."""

from __future__ import annotations

import argparse

from aiayn.cli import constituency
from aiayn.cli.options import counting_number
from aiayn.data.cleaning import DEFAULT_DROP, Cleaning, Score
from aiayn.data.recipe import Recipe, load_recipe
from aiayn.data.sources import Filters, PairFiles, SplitFiles, choose_corpus
from aiayn.errors import AiaynError

# One source (the mutually exclusive group), written by hand: argparse puts the whole group on one
# line, wider than a terminal of 90 columns.
_USAGE = """%(prog)s [-h] --out DATA_DIR
       [--corpus NAME | --src F --tgt F | --tsv F | --recipe F.yaml |
        --treebank DIR | --trees-train F [--trees-valid F] [--trees-test F]]
       [--valid-src F --valid-tgt F | --valid-tsv F]
       [--test-src F --test-tgt F | --test-tsv F]
       [--src-lang SRC_LANG] [--tgt-lang TGT_LANG] [--vocab-size VOCAB_SIZE] [--spm F]
       [--max-len MAX_LEN] [--max-ratio MAX_RATIO] [--train-limit N] [--seed SEED]
       [--clean] [--score-models FORWARD REVERSE] [--score-drop SHARE]
       [--workers WORKERS] [--force] [--skip-bad-lines] [--no-progress]"""
_HELD_OUT = tuple(f"{split}_{kind}" for split in ("valid", "test") for kind in ("src", "tgt", "tsv"))


def add_prepare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="turn a corpus into a data directory (vocabulary, token shards, raw dev/test text)",
        description="Prepare data (section 5.1): a built-in corpus or your own parallel text -> DATA_DIR.",
        usage=_USAGE,
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--corpus",
        metavar="NAME",
        help="built-in: bible-es-en (default), bible-es-en-web, libreoffice-*, synthetic-trees (parsing)",
    )
    source.add_argument("--src", metavar="F", help="source sentences, one per line (with --tgt)")
    source.add_argument("--tsv", metavar="F", help="source<TAB>target, one pair per line")
    source.add_argument(
        "--recipe",
        metavar="F.yaml",
        help="several corpora with a weight each, and the cleaning rules (docs: Data recipes)",
    )
    constituency.add_tree_sources(source, p)
    p.add_argument("--tgt", metavar="F", help="target sentences, aligned line by line with --src")
    p.add_argument("--out", required=True, metavar="DATA_DIR", help="the data directory to write")
    for split in ("valid", "test"):
        p.add_argument(f"--{split}-src", metavar="F", help=f"{split} source file (else split off train)")
        p.add_argument(f"--{split}-tgt", metavar="F", help=f"{split} target file")
        p.add_argument(f"--{split}-tsv", metavar="F", help=f"{split} pairs as TSV")
    p.add_argument("--src-lang", help="source language code (default: the --src file's suffix)")
    p.add_argument("--tgt-lang", help="target language code (default: the --tgt file's suffix)")
    p.add_argument("--vocab-size", type=int, help="joint BPE pieces (default 8000, trees 16000; paper 37000)")
    p.add_argument(
        "--spm",
        metavar="F",
        help="encode with this SentencePiece model (or a model/data directory's spm.model) instead of "
        "training one: to fine-tune that model on this data (aiayn train --init-from)",
    )
    p.add_argument("--max-len", type=int, default=Filters.max_len, help="drop longer train pairs (tokens)")
    p.add_argument(
        "--max-ratio",
        type=float,
        default=Filters.max_ratio,
        help="drop train pairs with a larger length ratio",
    )
    p.add_argument(
        "--train-limit", type=int, metavar="N", help="keep a seeded random sample of N train pairs"
    )
    p.add_argument(
        "--seed", type=int, default=1, help="seed of the split of your own files and of the sample"
    )
    p.add_argument(
        "--clean",
        action="store_true",
        help="drop duplicate, near-duplicate, copied and wrong-language train pairs (a sample of each "
        "rule's removals in DATA_DIR/cleaning/)",
    )
    p.add_argument(
        "--score-models",
        nargs=2,
        metavar=("FORWARD", "REVERSE"),
        help="the score rule: drop the pairs that these two model directories (source -> target, "
        "target -> source) score worst by dual conditional cross-entropy (with or without --clean)",
    )
    p.add_argument(
        "--score-drop",
        type=float,
        metavar="SHARE",
        help=f"the share of the pairs kept by the other rules that the score rule drops ({DEFAULT_DROP})",
    )
    p.add_argument(
        "--workers",
        type=counting_number,
        help="threads of the vocabulary's training and of encoding (default: the cores; the output is "
        "the same for any number)",
    )
    p.add_argument("--force", action="store_true", help="prepare again even if DATA_DIR is already prepared")
    p.add_argument("--skip-bad-lines", action="store_true", help="skip (and count) invalid UTF-8 / TSV lines")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=run_prepare)


def _corpus(args: argparse.Namespace) -> str | SplitFiles | Recipe:
    """--corpus, --recipe, or the user's files (--src/--tgt or --tsv, and the valid/test ones)."""
    if args.recipe is not None:
        given = [f"--{n.replace('_', '-')}" for n in ("tgt", *_HELD_OUT) if getattr(args, n) is not None]
        if given:
            raise AiaynError(f"--recipe names its own files; {given[0]} belongs in the recipe")
        return load_recipe(args.recipe)
    files = SplitFiles(
        PairFiles(args.src, args.tgt, args.tsv),
        PairFiles(args.valid_src, args.valid_tgt, args.valid_tsv),
        PairFiles(args.test_src, args.test_tgt, args.test_tsv),
    )
    return choose_corpus(args.corpus, files)


def _cleaning(args: argparse.Namespace) -> Cleaning | None:
    """--clean's rules, and the score rule with --score-models (alone: the only rule)."""
    if args.score_models is None:
        if args.score_drop is not None:
            raise AiaynError("--score-drop needs --score-models FORWARD REVERSE")
        return Cleaning() if args.clean else None
    drop = DEFAULT_DROP if args.score_drop is None else args.score_drop
    score = Score(*args.score_models, drop=drop)
    return Cleaning(score=score) if args.clean else Cleaning(rules=("score",), score=score)


def run_prepare(args: argparse.Namespace) -> None:
    from aiayn.data.datadir import DataDir
    from aiayn.data.prepare import prepare

    if constituency.wants_trees(args):
        return constituency.run_prepare(args)
    out = prepare(
        args.out,
        _corpus(args),
        filters=Filters(args.max_len, args.max_ratio, args.train_limit),
        clean=_cleaning(args),
        workers=args.workers,
        vocab_size=args.vocab_size,
        spm=args.spm,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        seed=args.seed,
        force=args.force,
        skip_bad_lines=args.skip_bad_lines,
        progress=not args.no_progress,
    )
    data = DataDir(out)
    meta, (pairs, dropped) = data.meta, data.counts()
    print(
        f"{out}: {meta['src_lang']}->{meta['tgt_lang']}, {pairs} pairs, "
        f"vocabulary {meta['vocab_size']:,}, {dropped:,} pairs dropped (see meta.json)"
    )
