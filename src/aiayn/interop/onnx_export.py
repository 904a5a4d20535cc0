"""`aiayn export-onnx`: an aiayn model directory -> ONNX models in Optimum's seq2seq layout.

The directory is what transformers.js and Optimum's ORTModelForSeq2SeqLM load for a Marian model:

    config.json, generation_config.json      as `export-hf` writes them (MarianMTModel's)
    tokenizer_config.json, source.spm, ...   MarianTokenizer's files, and tokenizer.json (onnx_tokenizer)
    onnx/encoder_model.onnx                  input_ids, attention_mask -> last_hidden_state
    onnx/decoder_model_merged.onnx           one decoder step, first or later (onnx_merge)
    onnx/*_quantized.onnx                    with --int8: ONNX Runtime's dynamic int8 weights
    index.html, transformers/                a page that translates in the browser (onnx_page)

It goes through `export-hf` (inside the hidden directory that OUT is built in beside it, which the
next run there removes if this one is killed: the same refusals, OPUS-MT's vocabulary layout and
config), then traces the network of that Marian directory (onnx_graphs) with
torch.onnx's exporter (torch.export underneath): no Transformers and no Optimum are needed, so
it runs in aiayn's own environment (Optimum's exporter pins an older Transformers).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from aiayn.errors import AiaynError
from aiayn.interop.hf_export import export_hf
from aiayn.interop.onnx_graphs import MarianDecoderGraph, MarianEncoderGraph, past_names
from aiayn.interop.onnx_page import write_page
from aiayn.interop.onnx_tokenizer import tokenizer_json
from aiayn.model.io import read_config
from aiayn.safe_io import building_directory, check_dir_path, vacant

B, SRC, TGT, PAST = (
    "batch_size",
    "encoder_sequence_length",
    "decoder_sequence_length",
    "past_decoder_sequence_length",
)
INPUTS = ["input_ids", "encoder_attention_mask", "encoder_hidden_states"]


def check_exportable(model_dir: Path, out: Path) -> None:
    """One-line errors before any work: no exporter, a vision or windowed model, an OUT holding something."""
    for package in ("onnx", "onnxscript"):  # torch.onnx's exporter needs both
        if importlib.util.find_spec(package) is None:
            raise AiaynError(f"export-onnx needs the package {package}: pip install 'aiayn[onnx]'")
    config, _ = read_config(model_dir)  # a vision model's directory is refused here
    window = getattr(config, "attention_window", None)
    if window:
        raise AiaynError(
            f"{model_dir}: restricted self-attention (attention_window={window}) has no Marian or ONNX "
            "seq2seq equivalent; export-onnx takes full-attention translation models"
        )
    if out.exists() and out.resolve() == model_dir.resolve():
        raise AiaynError(f"{out}: the output directory cannot be the model directory itself")
    check_dir_path(out, "OUT")  # a file there (or on the way), or a link to nothing
    if not vacant(out):
        raise AiaynError(f"{out} exists and is not an empty directory; choose another output directory")


def _export(
    module: torch.nn.Module, args: tuple, path: Path, names: list[str], outputs: list[str], shapes
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on renamed axes and deprecations
        torch.onnx.export(
            module, args, str(path), input_names=names, output_names=outputs, dynamic_shapes=shapes,
            dynamo=True, external_data=False, verbose=False,
        )  # fmt: skip


def _trace_decoders(state: dict[str, torch.Tensor], config: dict[str, Any], memory: torch.Tensor, work: Path):
    """decoder_model.onnx and decoder_with_past_model.onnx in `work` (the merge's two halves)."""
    layers, heads = config["decoder_layers"], config["decoder_attention_heads"]
    width = config["d_model"] // heads
    batch, src_len = memory.shape[:2]
    tokens = torch.full((batch, 2), config["decoder_start_token_id"])  # two steps: no size-1 axis
    mask = torch.ones(batch, src_len, dtype=torch.long)
    outputs = ["logits", *past_names(layers, "present")]
    step_shapes = ({0: B, 1: TGT}, {0: B, 1: SRC}, {0: B, 1: SRC})
    first = MarianDecoderGraph(state, config, with_past=False).eval()
    _export(
        first, (tokens, mask, memory, []), work / "decoder_model.onnx", INPUTS, outputs, (*step_shapes, [])
    )
    # distinct tensors: torch.export would take one tensor passed twice for one input
    past = [torch.zeros(batch, heads, n, width) for _ in range(layers) for n in (3, 3, src_len, src_len)]
    past_shapes = [{0: B, 2: PAST}, {0: B, 2: PAST}, {0: B, 2: SRC}, {0: B, 2: SRC}] * layers
    later = MarianDecoderGraph(state, config, with_past=True).eval()
    names = [*INPUTS, *past_names(layers)]
    _export(later, (tokens, mask, memory, past), work / "decoder_with_past_model.onnx", names, outputs,
            (*step_shapes, past_shapes))  # fmt: skip


def _quantize(work: Path, names: list[str]) -> None:
    """`name`.onnx -> `name`_quantized.onnx: int8 weights of every MatMul and Gemm, activations
    quantized per call (ONNX Runtime's dynamic quantization)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for name in names:
        quantize_dynamic(
            work / f"{name}.onnx", work / f"{name}_quantized.onnx", op_types_to_quantize=["MatMul", "Gemm"],
            weight_type=QuantType.QInt8,
        )  # fmt: skip


def write_graphs(state: dict[str, torch.Tensor], config: dict[str, Any], onnx_dir: Path, int8: bool) -> None:
    """encoder_model.onnx and decoder_model_merged.onnx (and their _quantized twins when int8) of the
    Marian weights `state` (MarianMTModel's names) and `config` (config.json's dict) in `onnx_dir`."""
    import onnx

    from aiayn.interop.onnx_merge import merge_decoders

    onnx_dir.mkdir(parents=True, exist_ok=True)
    encoder = MarianEncoderGraph(state, config).eval()
    src = torch.full((2, 5), config["eos_token_id"])  # batch 2, 5 tokens: no axis of size 0 or 1
    mask = torch.ones_like(src)
    with torch.no_grad():
        memory = encoder(src, mask)
    shapes = ({0: B, 1: SRC}, {0: B, 1: SRC})
    names = ["input_ids", "attention_mask"]
    _export(encoder, (src, mask), onnx_dir / "encoder_model.onnx", names, ["last_hidden_state"], shapes)
    with tempfile.TemporaryDirectory(dir=onnx_dir) as tmp:  # beside the result, not in /tmp
        work = Path(tmp)
        _trace_decoders(state, config, memory, work)
        halves = ["decoder_model", "decoder_with_past_model"]
        suffixes = [""]
        if int8:
            shutil.copyfile(onnx_dir / "encoder_model.onnx", work / "encoder_model.onnx")
            _quantize(work, ["encoder_model", *halves])
            shutil.copyfile(work / "encoder_model_quantized.onnx", onnx_dir / "encoder_model_quantized.onnx")
            suffixes.append("_quantized")
        for suffix in suffixes:
            first, later = (onnx.load(work / f"{half}{suffix}.onnx") for half in halves)
            merged = merge_decoders(first, later)
            onnx.checker.check_model(merged)
            onnx.save(merged, onnx_dir / f"decoder_model_merged{suffix}.onnx")


def _write_tokenizer_json(hf: Path, out: Path, config: dict[str, Any], warn) -> None:
    """tokenizer.json from source.spm and vocab.json (one vocabulary: transformers.js has no second)."""
    if (hf / "target_vocab.json").exists():
        warn(f"{out}: separate source and target vocabularies: no tokenizer.json (transformers.js needs one)")
        return
    vocab = json.loads((hf / "vocab.json").read_text())
    settings = json.loads((hf / "tokenizer_config.json").read_text())
    piece = {i: p for p, i in vocab.items()}
    special = {
        "eos": piece[config["eos_token_id"]],
        "pad": piece[config["pad_token_id"]],
        "unk": settings.get("unk_token", "<unk>"),
    }
    data = tokenizer_json((hf / "source.spm").read_bytes(), vocab, special)
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False) + "\n")


def export_onnx(model_dir: str | Path, out_dir: str | Path, int8: bool = False, warn=None) -> Path:
    """Write the ONNX directory of `model_dir` (layout in the module's docstring) to `out_dir`.

    `warn` receives what the export leaves out (default: warnings.warn).
    """
    model_dir, out = Path(model_dir), Path(out_dir)
    check_exportable(model_dir, out)
    with building_directory(out, "OUT") as work, tempfile.TemporaryDirectory(dir=work) as tmp:
        # export-hf's warning is CTranslate2's and Marian's zero start vector; ONNX computes it exactly
        hf = export_hf(model_dir, Path(tmp) / "hf", warn=lambda message: None)
        for path in sorted(hf.iterdir()):
            if path.name != "model.safetensors":
                shutil.copyfile(path, work / path.name)
        config = json.loads((hf / "config.json").read_text())
        _write_tokenizer_json(hf, work, config, warn or warnings.warn)
        write_graphs(load_file(str(hf / "model.safetensors")), config, work / "onnx", int8)
        missing = write_page(work)
        if missing:
            (warn or warnings.warn)(missing)
    return out
