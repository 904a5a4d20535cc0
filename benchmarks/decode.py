"""Decoding speed: aiayn's beam search and greedy search against Hugging Face MarianMTModel.generate
(and CTranslate2 when it is installed), the same weights and inputs, in one run.

A randomly initialised MarianMTModel of the tiny preset's size (d_model 256, 3 + 3 layers, 4 heads,
d_ff 1024, 8k vocabulary; `--base`: 512, 6 + 6, 8, 2048, 32k) is converted to aiayn with
`aiayn.interop` (same function, checked below), EOS is suppressed through the output bias so that
every system generates exactly `--new-tokens` tokens per sentence, and each system translates the
same `--sentences` random sources of `--src-len` tokens (EOS included) in one batch. Each system
runs in its own worker process (spawned: CTranslate2's and PyTorch's thread pools never share a
process); the systems take turns, one at a time, for `--repeats` rounds after a warm-up run each. HF runs with
num_beams=4, length_penalty=alpha (aiayn: length_penalty_style="len", its equivalent), greedy with
num_beams=1. CTranslate2 runs with return_scores=True: each system returns every hypothesis's score,
as aiayn's searches always do (without it CTranslate2's greedy search skips the log-softmax of every
step, its src/decoding.cc: "Compute log probs only if required"; HF's greedy `generate` computes no
scores either way). Reported: output tokens per second (best of --repeats) and speed ratios (> 1: aiayn is
faster), and how many sentences get exactly HF's output tokens.

On the CPU aiayn's float32 model gets the weight packing `Translator.load` gives it
(`aiayn.runtime.linear.pack_for_inference`: oneDNN-reordered weights where they time faster).

int8 (on the CPU): aiayn's `--int8` (aiayn.runtime.quantize: dynamic int8 linear layers and output
layer) against CTranslate2's compute_type="int8" on the same converted model. Quantisation changes
some outputs, so each int8 system is compared with its own float32 run: the share of sentences
with exactly the same output tokens is reported, not required. (The weights are random, so the
logits are flat and near-ties common: expect lower shares here than with a trained model.)

ONNX Runtime (`--onnx`): the same weights through `aiayn.interop.onnx_export.write_graphs` (what
`aiayn export-onnx` writes: encoder_model.onnx and decoder_model_merged.onnx, and with int8 their
dynamically quantized twins), each step one run of the merged decoder with the past keys and
values fed back, under aiayn's own greedy and beam search (aiayn.interop.onnx_runtime), ONNX
Runtime's intra-op threads set to --threads.

`--json PATH` writes {"rows": [...]} for benchmarks/run_all.py: tok/s of aiayn against HF, against
CTranslate2 float32 and, in int8, against CTranslate2 int8, for beam 4 and greedy.

    python benchmarks/decode.py [--base] [--threads 2] [--device cpu] [--no-int8] [--onnx] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import tempfile
import time
from pathlib import Path

import torch
from transformers import MarianConfig, MarianMTModel

from aiayn.config import DecodeConfig
from aiayn.decode.generate import decode_batch
from aiayn.interop.marian_import import config_from_marian, resolve_embeddings
from aiayn.interop.weights import marian_to_aiayn
from aiayn.model.transformer import Transformer
from aiayn.runtime.linear import pack_for_inference
from aiayn.runtime.native_step import attach_native_decoder
from aiayn.runtime.quantize import quantize_int8
from workers import stop_workers  # benchmarks/, the script's own directory

SIZES = {
    "tiny": dict(vocab_size=8000, d_model=256, layers=3, heads=4, ffn=1024),
    "base": dict(vocab_size=32000, d_model=512, layers=6, heads=8, ffn=2048),
}
EOS, UNK = 0, 1  # Marian's ids; pad is the last id and the decoder starts from it
TARGET = 1.0  # run_all.py's bar: aiayn at least as fast as each peer
INT8_TARGET = 0.8  # int8 at >= 0.8x CTranslate2's int8


def build_models(size: str, device: str, suppress_eos: bool = True) -> tuple[MarianMTModel, Transformer]:
    """HF's MarianMTModel of `size`, random weights (seed 0), and the same model in aiayn; with
    `suppress_eos` EOS is never chosen (every system makes the same number of steps)."""
    s = SIZES[size]
    pad = s["vocab_size"] - 1
    hf_config = MarianConfig(
        vocab_size=s["vocab_size"], d_model=s["d_model"], encoder_layers=s["layers"],
        decoder_layers=s["layers"], encoder_attention_heads=s["heads"], decoder_attention_heads=s["heads"],
        encoder_ffn_dim=s["ffn"], decoder_ffn_dim=s["ffn"], max_position_embeddings=512, pad_token_id=pad,
        eos_token_id=EOS, decoder_start_token_id=pad, forced_eos_token_id=None, scale_embedding=True,
        activation_function="swish",
    )  # fmt: skip
    torch.manual_seed(0)
    hf = MarianMTModel(hf_config).eval()
    with torch.no_grad():
        hf.final_logits_bias[0, EOS] = -1e4 if suppress_eos else 0.0
    weights = {k: v for k, v in hf.state_dict().items()}
    embeddings, tie = resolve_embeddings(hf_config.to_dict(), weights)
    config = config_from_marian(hf_config.to_dict(), tie, unk_id=UNK).replace(dropout=0.0)
    model = Transformer(config)
    model.load_state_dict(marian_to_aiayn(weights, config, embeddings))
    return hf.to(device), model.eval().to(device)


def sources(n: int, length: int, vocab: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    src = torch.randint(2, vocab - 1, (n, length), generator=g)
    src[:, -1] = EOS
    return src.to(device)


def check_same_function(hf: MarianMTModel, model: Transformer, src: torch.Tensor) -> float:
    """Max |logit difference| on one input, EOS (biased by -1e4) left out."""
    tgt_in = torch.cat([torch.full_like(src[:, :1], model.config.start_id), src[:, :7]], dim=1)
    with torch.inference_mode():
        ours = model(src, tgt_in)[..., 1:]
        theirs = hf(input_ids=src, decoder_input_ids=tgt_in).logits[..., 1:]
    return float((ours - theirs).abs().max())


def convert_for_ctranslate2(hf: MarianMTModel, directory: Path, device: str = "cpu") -> Path | None:
    """Save `hf` and convert it for CTranslate2 under `directory`; None if CTranslate2 is not
    installed, or `device` is a GPU its build cannot use (its wheels are built against CUDA 12)."""
    try:
        import ctranslate2
        from ctranslate2.converters import transformers as ct2_transformers
    except ImportError:
        return None
    if device.startswith("cuda") and ctranslate2.get_cuda_device_count() == 0:
        print(f"CTranslate2 {ctranslate2.__version__} sees no CUDA device (its build's CUDA): skipped")
        return None
    vocab = hf.config.vocab_size

    class Vocabulary:  # what the converter reads from a MarianTokenizer
        eos_token, unk_token, pad_token = "</s>", "<unk>", "<pad>"

        def get_vocab(self):
            return {name: i for i, name in enumerate(ct2_names(vocab))}

    class Converter(ct2_transformers.TransformersConverter):
        def load_tokenizer(self, *args, **kwargs):
            return Vocabulary()

    hf.save_pretrained(directory / "hf")
    Converter(str(directory / "hf")).convert(str(directory / "ct2"), force=True)
    if device.startswith("cuda"):  # its cuBLAS is loaded at the first product: try one
        try:
            translator = ctranslate2.Translator(str(directory / "ct2"), device="cuda")
            translator.translate_batch([["t5"]], max_decoding_length=2)
        except RuntimeError as e:
            print(f"CTranslate2 {ctranslate2.__version__} cannot run on this GPU ({e}): skipped")
            return None
    return directory / "ct2"


def ct2_names(vocab: int) -> list[str]:
    """Token strings for ids 0..vocab-1 as the converted model's vocabulary has them."""
    return ["</s>", "<unk>"] + [f"t{i}" for i in range(2, vocab - 1)] + ["<pad>"]


def report(name: str, system: str, seconds: float, tokens: int) -> None:
    print(f"{name:7s} {system:17s} {tokens / seconds:8.0f} tok/s  ({seconds:.2f} s)")


# (aiayn system, peer): speed ratios, and rows for run_all.py
SPEED = [("aiayn", "HF generate"), ("aiayn", "CTranslate2"), ("aiayn int8", "CTranslate2 int8")]
SPEED += [("aiayn", "ONNX Runtime"), ("aiayn int8", "ONNX Runtime int8")]
# (system, reference): how many sentences get exactly the reference's output tokens
SAME = [("aiayn", "HF generate"), ("aiayn int8", "aiayn"), ("CTranslate2 int8", "CTranslate2")]
SAME += [("ONNX Runtime", "aiayn"), ("ONNX Runtime int8", "ONNX Runtime")]
PEER_LABEL = {"CTranslate2": "CTranslate2 fp32"}


def compare(size: str, name: str, seconds: dict, outputs: dict, tokens: int) -> tuple[list[dict], dict]:
    """Print the ratios and output agreement of one search; return run_all.py rows and the results."""
    n = len(outputs["aiayn"])
    result: dict = {f"{system} s": s for system, s in seconds.items()}
    for system, reference in SAME:
        if system in outputs and reference in outputs:
            same = sum(a == b for a, b in zip(outputs[system], outputs[reference], strict=True))
            result[f"{system} same as {reference}"] = same
            print(f"{'':7s} {system}: same output tokens as {reference}: {same}/{n}")
    rows = []
    for ours, peer in SPEED:
        if ours in seconds and peer in seconds:
            ratio = seconds[peer] / seconds[ours]
            print(f"{'':7s} {ours} / {peer}: {ratio:.2f}x")
            rows.append(
                dict(
                    measure=f"decode {size} {name}{' int8' * ('int8' in ours)}, tok/s",
                    aiayn=tokens / seconds[ours], peer=PEER_LABEL.get(peer, peer),
                    peer_value=tokens / seconds[peer], ratio=ratio, higher_is_better=True,
                    target=INT8_TARGET if "int8" in ours else TARGET,
                )
            )  # fmt: skip
    for system, fp32 in (
        ("aiayn int8", "aiayn"),
        ("CTranslate2 int8", "CTranslate2"),
        ("ONNX Runtime int8", "ONNX Runtime"),
    ):
        if system in seconds and fp32 in seconds:
            print(f"{'':7s} {system} / {fp32}: {seconds[fp32] / seconds[system]:.2f}x")
    return rows, result


# -- one worker process per system ----------------------------------------------------------------
def build_system(system: str, args: argparse.Namespace, ct2_dir: Path | None):
    """In a worker: a function beam -> the benchmark's sources translated, as token ids."""
    hf, model = build_models("base" if args.base else "tiny", args.device)
    src = sources(args.sentences, args.src_len, model.config.vocab_size, args.device)
    if system.startswith("ONNX Runtime"):
        return onnx_system(model, src, args, int8="int8" in system)
    if system.startswith("CTranslate2"):
        return ct2_system(src, "int8" if "int8" in system else "float32", args, ct2_dir)
    if system == "HF generate":
        return hf_system(hf, src, args)
    return aiayn_system(model, src, args, int8=system == "aiayn int8")


def ct2_system(src: torch.Tensor, compute_type: str, args: argparse.Namespace, ct2_dir: Path):
    import ctranslate2

    names = ct2_names(args.vocab_size)
    ids = {name: i for i, name in enumerate(names)}
    batch = [[names[i] for i in row] for row in src.tolist()]
    translator = ctranslate2.Translator(
        str(ct2_dir), device=args.device, compute_type=compute_type, intra_threads=args.threads
    )

    def translate(beam: int) -> list[list[int]]:
        results = translator.translate_batch(
            batch, beam_size=beam, length_penalty=args.alpha, max_decoding_length=args.new_tokens,
            min_decoding_length=args.new_tokens, max_batch_size=len(batch), return_scores=True,
        )  # fmt: skip
        return [[ids[t] for t in r.hypotheses[0]] for r in results]

    return translate


def hf_system(hf: MarianMTModel, src: torch.Tensor, args: argparse.Namespace):
    new = args.new_tokens

    def translate(beam: int) -> list[list[int]]:
        with torch.inference_mode():
            out = hf.generate(
                input_ids=src, attention_mask=torch.ones_like(src), num_beams=beam, do_sample=False,
                length_penalty=args.alpha, max_new_tokens=new, min_new_tokens=new, early_stopping=False,
            )  # fmt: skip
        return [t[1:new].tolist() for t in out.cpu()]  # without the start token and the final one

    return translate


def onnx_system(model: Transformer, src: torch.Tensor, args: argparse.Namespace, int8: bool):
    from aiayn.interop.onnx_runtime import OnnxModel, sessions

    config, new = model.config, args.new_tokens
    encoder, decoder = sessions(Path(args.onnx_dir), int8, args.threads)
    runner = OnnxModel(
        encoder,
        decoder,
        config.start_id,
        config.eos_id,
        config.pad_id,
        config.banned_ids,
        config.max_positions,
    )

    def translate(beam: int) -> list[list[int]]:
        options = DecodeConfig(beam_size=beam, alpha=args.alpha, length_penalty_style="len", max_len_a=0.0,
                               max_len_b=new - 1)  # fmt: skip
        return [h[0].tokens for h in runner.search(src, options)]

    return translate


def aiayn_system(model: Transformer, src: torch.Tensor, args: argparse.Namespace, int8: bool):
    if int8:
        model = quantize_int8(model)
    elif args.device == "cpu":
        pack_for_inference(model)  # as Translator.load does: oneDNN-packed weights where they pay
    if args.device == "cpu" and args.native:
        print(f"aiayn native decoding step: {attach_native_decoder(model)}", flush=True)
    new = args.new_tokens

    def translate(beam: int) -> list[list[int]]:
        options = DecodeConfig(beam_size=beam, alpha=args.alpha, length_penalty_style="len", max_len_a=0.0,
                               max_len_b=new - 1, batch_tokens=1 << 20)  # fmt: skip
        hyps = decode_batch(model, src, options)
        assert all(len(h[0].tokens) == new - 1 for h in hyps)  # new - 1 tokens + the forced EOS
        return [h[0].tokens for h in hyps]

    return translate


def worker(conn, system: str, args: argparse.Namespace, ct2_dir: Path | None) -> None:
    """Build one system, then answer ("run", beam) with (seconds, outputs) until ("stop",)."""
    torch.set_num_threads(args.threads)
    translate = build_system(system, args, ct2_dir)
    conn.send("ready")
    while (command := conn.recv())[0] == "run":
        start = time.perf_counter()
        out = translate(command[1])
        if args.device != "cpu":
            torch.cuda.synchronize()
        conn.send((time.perf_counter() - start, out))


def time_systems(systems: list[str], args: argparse.Namespace, ct2_dir: Path | None) -> dict:
    """{search name: ({system: best seconds}, {system: outputs})}: every system in its own process,
    one warm-up run each, then `--repeats` rounds in which the systems run in turn (never two at once)."""
    ctx = mp.get_context("spawn")
    workers = {}
    try:
        for system in systems:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker, args=(child, system, args, ct2_dir))
            proc.start()
            child.close()  # if the worker dies, recv() raises EOFError instead of hanging
            workers[system] = (proc, parent)
            parent.recv()  # built before the next one starts: no two builds share the cores
        results = {}
        for beam in (4, 1):
            seconds, outputs = {s: float("inf") for s in systems}, {}
            for _, conn in workers.values():
                conn.send(("run", beam))
                conn.recv()  # warm-up
            for _ in range(args.repeats):
                for system, (_, conn) in workers.items():
                    conn.send(("run", beam))
                    took, outputs[system] = conn.recv()
                    seconds[system] = min(seconds[system], took)
            results["greedy" if beam == 1 else f"beam {beam}"] = seconds, outputs
        return results
    finally:
        stop_workers(workers)


def run(args: argparse.Namespace) -> tuple[list[dict], dict]:
    """Time every system; print the table; return run_all.py rows and the raw results."""
    torch.set_num_threads(args.threads)
    size = "base" if args.base else "tiny"
    hf, model = build_models(size, args.device)
    src = sources(args.sentences, args.src_len, model.config.vocab_size, args.device)
    args.vocab_size = model.config.vocab_size
    print(f"max |logit difference| aiayn vs HF on the same input: {check_same_function(hf, model, src):.2e}")
    int8 = args.int8 and args.device == "cpu"
    systems = ["aiayn", "HF generate"] + ["aiayn int8"] * int8
    with tempfile.TemporaryDirectory() as tmp:
        ct2_dir = convert_for_ctranslate2(hf, Path(tmp), args.device)
        if ct2_dir is not None:
            systems += ["CTranslate2"] + ["CTranslate2 int8"] * int8
        if args.onnx:
            from aiayn.interop.onnx_export import write_graphs

            args.onnx_dir = str(Path(tmp) / "onnx")  # the workers read it
            write_graphs(hf.state_dict(), hf.config.to_dict(), Path(args.onnx_dir), int8=int8)
            systems += ["ONNX Runtime"] + ["ONNX Runtime int8"] * int8
        del hf, model
        new, tokens = args.new_tokens, args.sentences * args.new_tokens
        print(f"{platform.machine()}, torch {torch.__version__}, {args.threads} threads, {args.device}: "
              f"{args.sentences} sentences x {args.src_len} source tokens, {new} generated each; "
              f"each system in its own process")  # fmt: skip
        timed = time_systems(systems, args, ct2_dir)
    rows, results = [], {}
    for name, (seconds, outputs) in timed.items():
        for system in systems:
            report(name, system, seconds[system], tokens)
        search_rows, results[name] = compare(size, name, seconds, outputs, tokens)
        rows += search_rows
    if ct2_dir is None and args.device == "cpu":
        print("CTranslate2 is not installed (pip install ctranslate2): skipped")
    return rows, results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", action="store_true", help="the base model's size instead of tiny's")
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--src-len", type=int, default=30)
    p.add_argument("--new-tokens", type=int, default=50)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-int8", dest="int8", action="store_false", help="skip the int8 rows (CPU only)")
    p.add_argument(
        "--python-step",
        dest="native",
        action="store_false",
        help="decode with the Python step, not the native one (aiayn.runtime.native_step)",
    )
    p.add_argument(
        "--onnx", action="store_true", help="add ONNX Runtime (export-onnx's graphs), fp32 and int8"
    )
    p.add_argument("--json", type=Path, help="write the result rows here (for run_all.py)")
    args = p.parse_args()
    rows, results = run(args)
    if args.json:
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"rows": rows, "results": results, "args": settings}, indent=1))


if __name__ == "__main__":
    main()
