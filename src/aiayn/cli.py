"""The `aiayn` command line. Each subcommand is a small `_add_<name>` function that declares its
arguments and a handler that calls typed library functions; no Namespace travels further.

Errors that a user can fix (`AiaynError`) print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from aiayn.errors import AiaynError

Handler = Callable[[argparse.Namespace], int | None]


# Each entry adds one subcommand (its arguments, and `handler` via set_defaults).
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="turn a corpus into a data directory (vocabulary, token shards, raw dev/test text)",
        description="Prepare data (section 5.1): a built-in corpus or your own parallel text -> DATA_DIR.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--corpus", metavar="NAME", help="built-in: bible-es-en (default), bible-es-en-web, libreoffice-en-de"
    )
    source.add_argument("--src", metavar="F", help="source sentences, one per line (with --tgt)")
    source.add_argument("--tsv", metavar="F", help="source<TAB>target, one pair per line")
    p.add_argument("--tgt", metavar="F", help="target sentences, aligned line by line with --src")
    p.add_argument("--out", required=True, metavar="DATA_DIR", help="the data directory to write")
    for split in ("valid", "test"):
        p.add_argument(f"--{split}-src", metavar="F", help=f"{split} source file (else split off train)")
        p.add_argument(f"--{split}-tgt", metavar="F", help=f"{split} target file")
        p.add_argument(f"--{split}-tsv", metavar="F", help=f"{split} pairs as TSV")
    p.add_argument("--src-lang", help="source language code (default: the --src file's suffix)")
    p.add_argument("--tgt-lang", help="target language code (default: the --tgt file's suffix)")
    p.add_argument("--vocab-size", type=int, default=8000, help="joint BPE pieces (paper: 37000)")
    p.add_argument("--max-len", type=int, default=250, help="drop longer train pairs (tokens)")
    p.add_argument("--max-ratio", type=float, default=9.0, help="drop train pairs with a larger length ratio")
    p.add_argument("--seed", type=int, default=1, help="seed of the valid/test split of your own files")
    p.add_argument("--force", action="store_true", help="prepare again even if DATA_DIR is already prepared")
    p.add_argument("--skip-bad-lines", action="store_true", help="skip (and count) invalid UTF-8 / TSV lines")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=_run_prepare)


def _run_prepare(args: argparse.Namespace) -> None:
    from aiayn.data.prepare import load_meta, prepare

    user_files = [args.src, args.tgt, args.tsv, args.valid_src, args.valid_tgt, args.valid_tsv]
    user_files += [args.test_src, args.test_tgt, args.test_tsv]
    out = prepare(
        args.out,
        corpus=args.corpus or (None if any(user_files) else "bible-es-en"),
        src=args.src,
        tgt=args.tgt,
        tsv=args.tsv,
        valid_src=args.valid_src,
        valid_tgt=args.valid_tgt,
        valid_tsv=args.valid_tsv,
        test_src=args.test_src,
        test_tgt=args.test_tgt,
        test_tsv=args.test_tsv,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        vocab_size=args.vocab_size,
        max_len=args.max_len,
        max_ratio=args.max_ratio,
        seed=args.seed,
        force=args.force,
        skip_bad_lines=args.skip_bad_lines,
        progress=not args.no_progress,
    )
    meta = load_meta(out)
    pairs = ", ".join(f"{split} {n:,}" for split, n in meta["pairs"].items())
    dropped = sum(n for split in meta["dropped"].values() for n in split.values())
    print(
        f"{out}: {meta['src_lang']}->{meta['tgt_lang']}, {pairs} pairs, "
        f"vocabulary {meta['vocab_size']:,}, {dropped:,} pairs dropped (see meta.json)"
    )


COMMANDS.append(_add_prepare)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need': train, translate, serve."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except AiaynError as err:
        print(f"aiayn {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
