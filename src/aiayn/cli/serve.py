"""`aiayn serve` and `aiayn attention`: the HTTP server and attention heatmaps."""

from __future__ import annotations

import argparse

from aiayn.cli.options import add_device_option
from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError


def _port(text: str) -> int:
    """A TCP port number, 0-65535 (argparse says which flag when it is not)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return port


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a model over HTTP (JSON API, micro-batching) with a page that shows attention",
        description="POST /v1/translate, GET /v1/health, GET /v1/model, the page at /, API docs at /docs.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory (aiayn average, import-marian)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    p.add_argument("--port", type=_port, default=8000, help="port (0: any free one)")
    p.add_argument("--max-batch", type=int, default=64, help="most texts in one request (else 413)")
    p.add_argument("--max-chars", type=int, default=2000, help="most characters in one text (else 413)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a request may take (else 503)")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="ms to gather requests into one batch")
    p.add_argument("--batch-texts", type=int, default=64, help="most texts per model call; 1 = no batching")
    p.add_argument(
        "--max-attention-tokens",
        type=int,
        default=128,
        help="most tokens per side of an attention answer (else 413)",
    )
    p.add_argument(
        "--max-work",
        type=int,
        default=262_144,
        help="most texts x beam x (|source| + 50) in a request (else 413)",
    )
    p.add_argument(
        "--batch-work", type=int, default=16_384, help="the same per model call: larger requests take turns"
    )
    p.add_argument("--max-queue", type=int, default=1024, help="most texts waiting for the model (else 503)")
    add_device_option(p)
    p.add_argument("--int8", action="store_true", help="int8 linear layers (dynamic quantisation; CPU only)")
    p.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> None:
    from aiayn.serve import ServeSettings, serve

    names = ("max_batch", "max_chars", "timeout", "batch_wait_ms", "batch_texts", "max_attention_tokens")
    names += ("max_work", "batch_work", "max_queue")
    settings = ServeSettings(**{name: getattr(args, name) for name in names})
    serve(args.model_dir, args.host, args.port, settings, args.device, int8=args.int8)


def add_attention(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attention",
        help="translate one sentence and draw its attention as a PNG (the paper's section 7 figures)",
        description="A grid of the heads of one layer (or one head), tokens on both axes.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory")
    p.add_argument("text", metavar="TEXT", help="the sentence to translate")
    p.add_argument("--out", required=True, metavar="F.png", help="the PNG file to write")
    p.add_argument("--layer", type=int, help="layer number, 1 = first (default: the last)")
    p.add_argument("--head", type=int, help="only this head, 1 = first (default: a grid of all heads)")
    p.add_argument("--kind", choices=["cross", "encoder", "decoder"], default="cross", help="which attention")
    p.add_argument("--beam", type=int, default=DecodeConfig.beam_size, help="beam size (paper: 4)")
    p.add_argument(
        "--alpha", type=float, default=DecodeConfig.alpha, help="length penalty exponent (paper: 0.6)"
    )
    add_device_option(p)
    p.set_defaults(handler=_run_attention)


def _run_attention(args: argparse.Namespace) -> None:
    from aiayn.apps.viz import png_path, save_attention_png
    from aiayn.decode.translator import Translator

    png_path(args.out)  # before the model loads: a bad --out fails fast
    if not args.text.strip():
        raise AiaynError("TEXT is empty: give the sentence to translate")
    translator = Translator.load(args.model_dir, args.device)
    attn = translator.attention(args.text, beam_size=args.beam, alpha=args.alpha)
    out = save_attention_png(attn, args.out, args.kind, args.layer, args.head)
    print(attn["translation"])
    print(f"wrote {out}")
