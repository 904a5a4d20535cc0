"""Decoding speed: aiayn's beam search and greedy search against Hugging Face MarianMTModel.generate
(and CTranslate2 when it is installed), the same weights and inputs, in one run.

A randomly initialised MarianMTModel of the tiny preset's size (d_model 256, 3 + 3 layers, 4 heads,
d_ff 1024, 8k vocabulary; `--base`: 512, 6 + 6, 8, 2048, 32k) is converted to aiayn with
`aiayn.interop` (same function, checked below), EOS is suppressed through the output bias so that
every system generates exactly `--new-tokens` tokens per sentence, and each system translates the
same `--sentences` random sources of `--src-len` tokens (EOS included) in one batch. HF runs with
num_beams=4, length_penalty=alpha (aiayn: length_penalty_style="len", its equivalent), greedy with
num_beams=1. Reported: output tokens per second (best of --repeats) and speed ratios (> 1: aiayn is
faster), and how many sentences get exactly HF's output tokens.

    python benchmarks/decode.py [--base] [--threads 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import torch
from transformers import MarianConfig, MarianMTModel

from aiayn.config import DecodeConfig
from aiayn.decode.stepper import decode_batch
from aiayn.interop.marian_import import config_from_marian, resolve_embeddings
from aiayn.interop.weights import marian_to_aiayn
from aiayn.model.transformer import Transformer

SIZES = {
    "tiny": dict(vocab_size=8000, d_model=256, layers=3, heads=4, ffn=1024),
    "base": dict(vocab_size=32000, d_model=512, layers=6, heads=8, ffn=2048),
}
EOS, UNK = 0, 1  # Marian's ids; pad is the last id and the decoder starts from it


def build_models(size: str, device: str) -> tuple[MarianMTModel, Transformer]:
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
        hf.final_logits_bias[0, EOS] = -1e4  # never stop early: every system makes the same number of steps
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


def ctranslate2_runner(hf: MarianMTModel, src: torch.Tensor, threads: int, device: str):
    """A function translating `src` with CTranslate2 (float32), or None if it is not installed."""
    try:
        import ctranslate2
        from ctranslate2.converters import transformers as ct2_transformers
    except ImportError:
        return None
    vocab = hf.config.vocab_size
    names = ["</s>", "<unk>"] + [f"t{i}" for i in range(2, vocab - 1)] + ["<pad>"]

    class Vocabulary:  # what the converter reads from a MarianTokenizer
        eos_token, unk_token, pad_token = "</s>", "<unk>", "<pad>"

        def get_vocab(self):
            return {name: i for i, name in enumerate(names)}

    class Converter(ct2_transformers.TransformersConverter):
        def load_tokenizer(self, *args, **kwargs):
            return Vocabulary()

    tmp = Path(tempfile.mkdtemp())
    hf.save_pretrained(tmp / "hf")
    Converter(str(tmp / "hf")).convert(str(tmp / "ct2"), force=True)
    translator = ctranslate2.Translator(str(tmp / "ct2"), device=device, intra_threads=threads)
    batch = [[names[i] for i in row] for row in src.tolist()]
    return lambda beam, alpha, new: translator.translate_batch(
        batch, beam_size=beam, length_penalty=alpha, max_decoding_length=new, min_decoding_length=new,
        max_batch_size=len(batch),
    )  # fmt: skip


def best_time(fn, repeats: int) -> tuple[float, object]:
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times), out


def report(name: str, system: str, seconds: float, tokens: int) -> None:
    print(f"{name:7s} {system:12s} {tokens / seconds:8.0f} tok/s  ({seconds:.2f} s)")


def run(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    hf, model = build_models("base" if args.base else "tiny", args.device)
    src = sources(args.sentences, args.src_len, model.config.vocab_size, args.device)
    print(f"max |logit difference| aiayn vs HF on the same input: {check_same_function(hf, model, src):.2e}")
    ct2 = ctranslate2_runner(hf, src, args.threads, args.device)
    new, tokens = args.new_tokens, args.sentences * args.new_tokens
    print(f"{platform.machine()}, torch {torch.__version__}, {args.threads} threads, {args.device}: "
          f"{args.sentences} sentences x {args.src_len} source tokens, {new} generated each")  # fmt: skip
    for beam in (4, 1):
        name = "greedy" if beam == 1 else f"beam {beam}"
        options = DecodeConfig(beam_size=beam, alpha=args.alpha, length_penalty_style="len", max_len_a=0.0,
                               max_len_b=new - 1, batch_tokens=1 << 20)  # fmt: skip
        ours_s, ours = best_time(lambda o=options: decode_batch(model, src, o), args.repeats)
        assert all(len(h[0].tokens) == new - 1 for h in ours)  # new - 1 tokens + the forced EOS

        def hf_generate(beam=beam):
            with torch.inference_mode():
                return hf.generate(
                    input_ids=src, attention_mask=torch.ones_like(src), num_beams=beam, do_sample=False,
                    length_penalty=args.alpha, max_new_tokens=new, min_new_tokens=new, early_stopping=False,
                )  # fmt: skip

        hf_s, theirs = best_time(hf_generate, args.repeats)
        same = sum(h[0].tokens == t[1:new].tolist() for h, t in zip(ours, theirs.cpu(), strict=True))
        report(name, "aiayn", ours_s, tokens)
        report(name, "HF generate", hf_s, tokens)
        print(f"{'':7s} aiayn / HF: {hf_s / ours_s:.2f}x; same output tokens as HF: {same}/{args.sentences}")
        if ct2 is not None:
            ct2_s, _ = best_time(lambda b=beam: ct2(b, args.alpha, new), args.repeats)
            report(name, "CTranslate2", ct2_s, tokens)
            print(f"{'':7s} aiayn / CTranslate2: {ct2_s / ours_s:.2f}x")
    if ct2 is None:
        print("CTranslate2 is not installed (pip install ctranslate2): skipped")


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
    run(p.parse_args())


if __name__ == "__main__":
    main()
