"""`aiayn variations`: Table 3 of the paper (section 6.2) on a prepared data directory."""

from __future__ import annotations

import argparse

from aiayn.cli.options import add_device_option, add_set_option


def add_variations(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "variations",
        help="Table 3 (6.2): train and score the paper's variations of the base model, one run each",
        description="Train each row of Table 3 (a change to the reference model) for the same budget, "
        "score the last checkpoint on the dev split (perplexity, beam-search BLEU) and count its "
        "parameters; write OUT/ROW/ run directories, OUT/table.md, table.csv and bleu_vs_params.png. "
        "A re-run skips finished rows and resumes an interrupted one.",
    )
    p.add_argument("data_dir", metavar="DATA_DIR", help="a directory written by `aiayn prepare`")
    p.add_argument("--out", required=True, metavar="DIR", help="for the rows and the tables")
    p.add_argument(
        "--rows",
        default="A,B,C,D,E,big",
        help="groups (A-E, big; W: restricted self-attention, r = 4, 8, 16) or row names (A-h1, C-N2, "
        "W-r4, ...), comma-separated; base always runs (default: A,B,C,D,E,big)",
    )
    p.add_argument(
        "--preset",
        choices=["tiny", "base"],
        default="tiny",
        help="the reference: tiny with the CPU recipe (rows scaled by the paper's ratios) or base",
    )
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--steps", type=int, metavar="N", help="updates per row")
    budget.add_argument("--minutes", type=float, metavar="M", help="minutes of training per row")
    add_set_option(p, "a model, training or decoding setting of the reference, e.g. --set max_tokens=2000")
    add_device_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=_run_variations)


def _run_variations(args: argparse.Namespace) -> None:
    from pathlib import Path

    from aiayn.apps.variations import Budget, run_variations
    from aiayn.apps.variations.table import OUTPUT_FILES

    budget = Budget(steps=args.steps, minutes=args.minutes)
    run_variations(
        args.data_dir,
        args.out,
        budget,
        rows=args.rows,
        preset=args.preset,
        overrides=args.overrides,
        device=args.device,
        progress=not args.no_progress,
    )
    out = Path(args.out)
    print((out / "table.md").read_text(encoding="utf-8"))
    for name in OUTPUT_FILES:
        print(f"wrote {out / name}")
