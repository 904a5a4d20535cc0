"""`aiayn serve` and `aiayn attention`: the HTTP server and attention heatmaps."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aiayn.cli.decoding import add_draft_options, add_target_option, target_language
from aiayn.cli.options import add_device_option
from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError

if TYPE_CHECKING:
    from aiayn.serve import ServeSettings


def _port(text: str) -> int:
    """A TCP port number, 0-65535 (argparse says which flag when it is not)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return port


# The flags of ServeSettings' fields (--max-batch sets max_batch): their defaults are the dataclass's,
# for a flag left out leaves its field alone (serve_settings). ServeSettings is not imported to build
# the parser: aiayn.serve loads torch and FastAPI, seconds on every `aiayn` command.
SERVE_FLAGS: dict[str, tuple[type, str]] = {
    "max_batch": (int, "most texts in one request (else 413)"),
    "max_chars": (int, "most characters in one text (else 413)"),
    "timeout": (float, "seconds a request may take (else 503)"),
    "batch_wait_ms": (float, "ms to gather requests into one batch"),
    "batch_texts": (int, "most texts per model call; 1 = no batching"),
    "max_attention_tokens": (int, "most tokens per side of an attention answer (else 413)"),
    "max_work": (int, f"most texts x beam x (|source| + {DecodeConfig.max_len_b}) in a request (else 413)"),
    "batch_work": (int, "the same per model call: larger requests take turns"),
    "max_queue": (int, "most texts waiting for the model (else 503)"),
}


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The ServeSettings of the flags given; the others keep the dataclass's defaults."""
    from aiayn.serve import ServeSettings

    given = {name: getattr(args, name) for name in SERVE_FLAGS if getattr(args, name) is not None}
    return ServeSettings(**given)


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a model over HTTP (JSON API, micro-batching) with a page that shows attention",
        description="POST /v1/translate, GET /v1/health, GET /v1/model, the page at /, API docs at /docs; "
        "LibreTranslate's POST /translate, POST /detect and GET /languages beside them.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory (aiayn average, import-marian)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    p.add_argument("--port", type=_port, default=8000, help="port (0: any free one)")
    for name, (kind, text) in SERVE_FLAGS.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
    add_device_option(p)
    p.add_argument("--int8", action="store_true", help="int8 linear layers (dynamic quantisation; CPU only)")
    add_draft_options(p, tokens=False)
    p.add_argument(
        "--shortlist", action="store_true", help="restrict the output layer to the model's shortlist"
    )
    p.add_argument(
        "--api-keys",
        metavar="FILE",
        help="keys (one a line) that the LibreTranslate-compatible endpoints require in api_key "
        "(default: none required)",
    )
    p.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> None:
    from aiayn.serve import serve

    serve(
        args.model_dir,
        args.host,
        args.port,
        serve_settings(args),
        args.device,
        args.int8,
        args.draft,
        args.shortlist,
        args.api_keys,
    )


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
    d = DecodeConfig
    p.add_argument(
        "--beam", type=int, default=d.beam_size, help=f"beam size (default {d.beam_size}, the paper's)"
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=d.alpha,
        help=f"length penalty exponent (default {d.alpha}, the paper's)",
    )
    add_device_option(p)
    add_target_option(p)
    p.set_defaults(handler=_run_attention)


def _run_attention(args: argparse.Namespace) -> None:
    from aiayn.apps.viz import png_path, save_attention_png
    from aiayn.decode.bundle import load_bundle
    from aiayn.decode.translator import Translator

    png_path(args.out)  # before the model loads: a bad --out fails fast
    if not args.text.strip():
        raise AiaynError("TEXT is empty: give the sentence to translate")
    translator = Translator(load_bundle(args.model_dir, args.device))
    language = target_language(args, translator.info)
    attn = translator.attention(args.text, beam_size=args.beam, alpha=args.alpha, target_language=language)
    out = save_attention_png(attn, args.out, args.kind, args.layer, args.head)
    print(attn["translation"])
    print(f"wrote {out}")
