"""`aiayn shortlist`: a vocabulary shortlist (aiayn.apps.shortlist) that makes each decoding step's
output layer cheaper."""

from __future__ import annotations

import argparse

from aiayn.cli.options import counting_number


def add_shortlist(sub: argparse._SubParsersAction) -> None:
    from aiayn.apps.defaults import CANDIDATES, FREQUENT, ITERATIONS

    p = sub.add_parser(
        "shortlist",
        help="build a model's vocabulary shortlist from a data directory (then translate --shortlist)",
        description="Lexical probabilities p(t|s) between source and target pieces by IBM Model 1 on "
        "DATA_DIR's training pairs; each source piece keeps its -k most probable target pieces, and the "
        "-n most frequent target pieces and the special ids are always kept. Written to "
        "MODEL_DIR/shortlist.safetensors; `translate --shortlist` then restricts the output layer of each "
        "batch to its sources' candidates, and export-hf writes it as CTranslate2's vmap.txt.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="the model directory to store the shortlist in")
    p.add_argument("data_dir", metavar="DATA_DIR", help="a data directory with MODEL_DIR's vocabulary")
    p.add_argument(
        "-k",
        type=counting_number,
        default=CANDIDATES,
        help=f"candidates per source piece (default {CANDIDATES})",
    )
    p.add_argument(
        "-n", type=int, default=FREQUENT, help=f"most frequent target pieces always kept (default {FREQUENT})"
    )
    p.add_argument(
        "--iterations", type=counting_number, default=ITERATIONS, help=f"EM iterations (default {ITERATIONS})"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=_run_shortlist)


def _run_shortlist(args: argparse.Namespace) -> None:
    from aiayn.apps.shortlist import build_shortlist

    path, shortlist = build_shortlist(
        args.model_dir, args.data_dir, args.k, args.n, args.iterations, progress=not args.no_progress
    )
    listed, frequent = int((shortlist.candidates >= 0).any(dim=1).sum()), len(shortlist.frequent)
    print(f"wrote {path}: {listed} source pieces with up to {args.k} candidates each, {frequent} frequent")
