"""`aiayn backtranslate REVERSE_MODEL TEXT --out DIR`: a synthetic parallel corpus from monolingual
text (aiayn.apps.backtranslate), for `prepare --recipe` to take as one more weighted source."""

from __future__ import annotations

import argparse

from aiayn.cli.options import add_device_option, counting_number
from aiayn.config import DecodeConfig, SamplingConfig


def add_backtranslate(sub: argparse._SubParsersAction) -> None:
    from aiayn.apps.defaults import BT_CHUNK as CHUNK
    from aiayn.apps.defaults import BT_TAG as TAG

    p = sub.add_parser(
        "backtranslate",
        help="translate monolingual target-language text with a reverse model into a synthetic corpus",
        description="Back-translation (Sennrich et al., 2016): REVERSE_MODEL (target -> source) translates "
        "TEXT, one sentence a line, into OUT/bt.SRC next to the text as OUT/bt.TGT. Sampled by default "
        "(Edunov et al., 2018); --beam N searches instead.",
    )
    p.add_argument("model", metavar="REVERSE_MODEL", help="a model directory translating target -> source")
    p.add_argument("text", metavar="TEXT", help="monolingual text in the reverse model's source language")
    p.add_argument("--out", required=True, metavar="OUT", help="the directory to write")
    p.add_argument("--beam", type=counting_number, help="beam search of this size instead of sampling")
    s = SamplingConfig
    p.add_argument("--temperature", type=float, default=s.temperature, help="sampling: divide log-probs")
    p.add_argument("--top-k", type=int, default=s.top_k, help="sampling: only the k most probable (0: all)")
    p.add_argument("--top-p", type=float, default=s.top_p, help="sampling: the smallest set with this mass")
    p.add_argument("--seed", type=int, default=s.seed, help="sampling: the draws' seed")
    p.add_argument("--tag", action="store_true", help=f"start every synthetic source with {TAG} (tagged BT)")
    p.add_argument(
        "--batch-tokens",
        type=counting_number,
        default=DecodeConfig.batch_tokens,
        help="source tokens a batch",
    )
    p.add_argument("--chunk", type=counting_number, default=CHUNK, help=f"lines per resumable part ({CHUNK})")
    add_device_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> None:
    from aiayn.apps.backtranslate import BackTranslation, backtranslate

    if args.beam is None:
        how = BackTranslation(
            DecodeConfig(beam_size=1, batch_tokens=args.batch_tokens),
            SamplingConfig(args.temperature, args.top_k, args.top_p, args.seed),
            args.tag,
        )
    else:
        how = BackTranslation(
            DecodeConfig(beam_size=args.beam, batch_tokens=args.batch_tokens), None, args.tag
        )
    out = backtranslate(
        args.model,
        args.text,
        args.out,
        how,
        device=args.device,
        chunk=args.chunk,
        progress=not args.no_progress,
    )
    print(f"back-translated: {out}")
