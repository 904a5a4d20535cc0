"""What the vocabulary shortlist buys and costs: tokens/s, BLEU and chrF of a model on a test set with
and without `--shortlist` (aiayn.decode.shortlist), in float32 and int8, beside CTranslate2 running
the same model exported with export-hf, without and with the same shortlist as its vmap
(`use_vmap=True`). One process, one thread setting, the same sources, batches of `--batch-tokens`.

The model directory must hold a shortlist (`aiayn shortlist MODEL DATA`). It also reports the
native step against the Python step for the restricted output layer (`KeptOutput(native=False)`),
so the choice the code makes (native where it runs) is backed by a figure.

    python benchmarks/shortlist.py MODEL_DIR DATA_DIR [--beam 4] [--limit N] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.decode import shortlist as shortlist_module
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.evaluate.bleu import score_texts


def timed(translate, sources: list[str]) -> tuple[list[str], float]:
    translate(sources[:8])  # warm-up: kernels chosen, caches made
    start = time.perf_counter()
    out = translate(sources)
    return out, time.perf_counter() - start


def aiayn_row(model: Path, sources, options: DecodeConfig, int8: bool, native: bool = True):
    translator = Translator.load(model, device="cpu", int8=int8)
    if not native:  # the restricted output layer in Python: KeptOutput without its native step
        original = shortlist_module.KeptOutput.__init__
        shortlist_module.KeptOutput.__init__ = lambda self, m, kept, native=True: original(
            self, m, kept, False
        )
    try:
        out, seconds = timed(lambda texts: translate_texts(translator, texts, options), sources)
    finally:
        if not native:
            shortlist_module.KeptOutput.__init__ = original
    tokens = sum(len(ids) for ids in translator.tokenizer.encode_target(out))
    return out, tokens / seconds


def ct2_rows(model: Path, sources, beam: int, batch_tokens: int, threads: int) -> dict:
    """CTranslate2 (fp32, int8) with and without the vmap on the export of `model`."""
    import ctranslate2
    import transformers
    from ctranslate2.converters import TransformersConverter

    from aiayn.interop.hf_export import export_hf

    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        hf = export_hf(model, Path(tmp) / "hf", warn=lambda message: None)
        TransformersConverter(str(hf)).convert(str(Path(tmp) / "ct2"), vmap=str(hf / "vmap.txt"))
        tokenizer = transformers.MarianTokenizer.from_pretrained(hf)
        batch = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(sources)["input_ids"]]
        for compute in ("float32", "int8"):
            ct2 = ctranslate2.Translator(str(Path(tmp) / "ct2"), compute_type=compute, intra_threads=threads)
            for vmap in (False, True):

                def translate(texts, ct2=ct2, vmap=vmap):
                    pieces = batch[: len(texts)]
                    results = ct2.translate_batch(
                        pieces,
                        beam_size=beam,
                        use_vmap=vmap,
                        max_batch_size=batch_tokens,
                        batch_type="tokens",
                        length_penalty=0.6,
                    )
                    return [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in results]

                out, seconds = timed(translate, sources)
                tokens = sum(len(tokenizer(text_target=o)["input_ids"]) - 1 for o in out)
                rows[f"CTranslate2 {compute}{' + vmap' if vmap else ''}"] = (out, tokens / seconds)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("data", type=Path)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--limit", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-tokens", type=int, default=4096, help="source tokens per batch (both systems)")
    p.add_argument("--no-ct2", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = DataDir(args.data)
    sources = data.raw("test", "src").read_text(encoding="utf-8").splitlines()[: args.limit]
    refs = data.raw("test", "tgt").read_text(encoding="utf-8").splitlines()[: args.limit]
    full = DecodeConfig(beam_size=args.beam, batch_tokens=args.batch_tokens)
    short = full.replace(shortlist=True)
    rows = {
        "aiayn fp32": aiayn_row(args.model, sources, full, False),
        "aiayn fp32 + shortlist": aiayn_row(args.model, sources, short, False),
        "aiayn fp32 + shortlist (Python step)": aiayn_row(args.model, sources, short, False, native=False),
        "aiayn int8": aiayn_row(args.model, sources, full, True),
        "aiayn int8 + shortlist": aiayn_row(args.model, sources, short, True),
    }
    if not args.no_ct2:
        rows.update(ct2_rows(args.model, sources, args.beam, args.batch_tokens, args.threads))
    translator = Translator.load(args.model, device="cpu")
    shortlist = translator.bundle.shortlist
    kept = [len(shortlist.kept(torch.tensor([ids]))) for ids in translator.encode(sources[:200])]
    vocab, mean = translator.config.vocab_size, sum(kept) / len(kept)
    print(f"{len(sources)} sentences, beam {args.beam}, {args.batch_tokens} tokens a batch")
    print(f"{args.threads} threads, vocabulary {vocab}")
    print(f"target pieces kept per sentence: {mean:.0f} (mean of the first 200)")
    print(
        "| system | tokens/s | vs aiayn fp32 | BLEU | chrF | same as aiayn fp32 |\n|---|---|---|---|---|---|"
    )
    for name, (out, speed) in rows.items():
        scores = score_texts(out, refs)
        same = sum(a == b for a, b in zip(out, rows["aiayn fp32"][0], strict=True)) / len(out)
        ratio = speed / rows["aiayn fp32"][1]
        bleu, chrf = scores["bleu"], scores["chrf"]
        print(f"| {name} | {speed:,.0f} | {ratio:.2f}x | {bleu:.2f} | {chrf:.2f} | {same:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
