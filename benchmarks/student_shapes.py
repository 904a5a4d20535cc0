"""Which student to distil into: the decoding speed of candidate shapes at the tiny preset's width
(d_model 256, d_ff 1024, 4 heads, an 8,000-piece vocabulary), before any of them is trained.

A decoding step runs the decoder only and the encoder runs once per sentence, so a deep encoder
with a shallow decoder ("Deep Encoder, Shallow Decoder", Kasai et al., 2021; the WMT efficiency
task's students) should translate at nearly the speed of its decoder's depth. Each shape, with
random weights (the speed of a shape does not depend on its weights), translates the same batch of
random sources to exactly `--new-tokens` tokens (EOS held off by a -1e4 output bias) through
`Translator`'s preparation (packed weights or int8, the native step), beam 4 and greedy; the best
of `--repeats` runs. Training decides quality; this decides what that quality costs.

    python benchmarks/student_shapes.py [--sentences 32] [--src-len 30] [--new-tokens 40] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.generate import decode_batch
from aiayn.model.transformer import Transformer
from aiayn.runtime.inference import prepare_for_inference

SHAPES = [(3, 3), (6, 1), (6, 2), (3, 1), (4, 1)]  # (encoder layers, decoder layers); (3, 3) is tiny


def build(encoder: int, decoder: int, int8: bool) -> Transformer:
    config = ModelConfig.preset("tiny", n_layers=encoder, n_decoder_layers=decoder, final_logits_bias=True)
    torch.manual_seed(0)
    model = Transformer(config.replace(dropout=0.0)).eval()
    with torch.no_grad():
        model.output_bias[config.eos_id] = -1e4  # every shape makes the same number of steps
    prepare_for_inference(model, int8)
    return model


def best_seconds(model: Transformer, src: torch.Tensor, beam: int, new: int, repeats: int) -> float:
    options = DecodeConfig(beam_size=beam, max_len_a=0.0, max_len_b=new, batch_tokens=1 << 20)
    decode_batch(model, src, options)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.inference_mode():
            hyps = decode_batch(model, src, options)
        times.append(time.perf_counter() - start)
    assert all(len(h[0].tokens) == new for h in hyps)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--src-len", type=int, default=30)
    p.add_argument("--new-tokens", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 8000, (args.sentences, args.src_len), generator=g)
    src[:, -1] = ModelConfig.preset("tiny").eos_id
    tokens = args.sentences * args.new_tokens
    print(f"{args.sentences} sentences of {args.src_len} tokens -> {args.new_tokens}, {args.threads} threads")
    print("| encoder + decoder layers | params (M) | beam 4 fp32 | beam 4 int8 | greedy fp32 | greedy int8 |")
    print("|---|---:|---:|---:|---:|---:|")
    base: dict[tuple, float] = {}
    for shape in SHAPES:
        cells = []
        for beam in (4, 1):
            for int8 in (False, True):
                model = build(*shape, int8)
                rate = tokens / best_seconds(model, src, beam, args.new_tokens, args.repeats)
                base.setdefault((beam, int8), rate)
                cells.append(f"{rate:,.0f} tok/s ({rate / base[(beam, int8)]:.2f}x)")
        params = sum(p.numel() for p in Transformer(build_config(*shape)).parameters()) / 1e6
        print(f"| {shape[0]} + {shape[1]} | {params:.2f} | {' | '.join(cells)} |", flush=True)
    return 0


def build_config(encoder: int, decoder: int) -> ModelConfig:
    return ModelConfig.preset("tiny", n_layers=encoder, n_decoder_layers=decoder)


if __name__ == "__main__":
    raise SystemExit(main())
