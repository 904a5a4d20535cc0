"""`aiayn import-marian`, `export-hf` and `export-onnx`: OPUS-MT, Hugging Face and ONNX interop."""

from __future__ import annotations

import argparse


def add_import_marian(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-marian",
        help="turn a Hugging Face Marian (OPUS-MT) model directory into an aiayn model directory",
        description="Convert a local MarianMTModel directory (config.json, model.safetensors or "
        "pytorch_model.bin, source.spm, target.spm, vocab.json) into an aiayn model directory that "
        "computes the same function and tokenizes with Marian's ids. Nothing is downloaded.",
    )
    p.add_argument("hf_dir", metavar="HF_DIR", help="a MarianMTModel directory (e.g. a downloaded OPUS-MT)")
    p.add_argument("model_dir", metavar="OUT_MODEL_DIR", help="the aiayn model directory to write")
    p.set_defaults(handler=_run_import_marian)


def _run_import_marian(args: argparse.Namespace) -> None:
    from aiayn.interop.marian_import import import_marian

    print(f"wrote {import_marian(args.hf_dir, args.model_dir)}")


def add_export_hf(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-hf",
        help="write an aiayn model as a Hugging Face MarianMTModel directory (then CTranslate2, ...)",
        description="Export to a MarianMTModel directory with equal outputs, laid out as an OPUS-MT "
        "model (</s> 0, <unk> 1, <pad> last, the decoder starting from <pad>) so that tools built for "
        "OPUS-MT (CTranslate2, ...) take it. Pre-norm, final-norm, learned-position models and "
        "layer_norm_eps other than 1e-5 cannot be expressed and are refused.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="an aiayn model directory")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the Hugging Face directory to write")
    p.set_defaults(handler=_run_export_hf)


def _run_export_hf(args: argparse.Namespace) -> None:
    import sys

    from aiayn.interop.hf_export import export_hf

    def warn(message: str) -> None:
        print(f"aiayn export-hf: warning: {message}", file=sys.stderr)

    print(f"wrote {export_hf(args.model_dir, args.out_dir, warn)}")


def add_export_onnx(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-onnx",
        help="write an aiayn model as ONNX models (ONNX Runtime, transformers.js) and a page that "
        "translates in the browser",
        description="Export to ONNX in Optimum's seq2seq layout: onnx/encoder_model.onnx and "
        "onnx/decoder_model_merged.onnx (one decoder step, first or later, with past keys and values), "
        "config.json, generation_config.json and the tokenizer (tokenizer.json too), as ONNX Runtime's "
        "seq2seq runners and transformers.js load them. index.html beside them translates in the "
        "browser with the bundled transformers.js (serve OUT_DIR with any static file server). The "
        "models it takes are those export-hf takes (not vision or windowed-attention models); "
        "OUT_DIR must be absent or empty.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="an aiayn model directory")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the directory to write (absent or empty)")
    p.add_argument(
        "--int8",
        action="store_true",
        help="also write onnx/*_quantized.onnx: ONNX Runtime's dynamically quantized int8 weights",
    )
    p.set_defaults(handler=_run_export_onnx)


def _run_export_onnx(args: argparse.Namespace) -> None:
    import sys

    from aiayn.interop.onnx_export import export_onnx

    def warn(message: str) -> None:
        print(f"aiayn export-onnx: warning: {message}", file=sys.stderr)

    print(f"wrote {export_onnx(args.model_dir, args.out_dir, int8=args.int8, warn=warn)}")


COMMANDS = (add_import_marian, add_export_hf, add_export_onnx)  # the group's subcommands, in --help's order
