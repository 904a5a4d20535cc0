"""One sentence a call, as an interactive user sends them: aiayn against CTranslate2 through their
public calls, the same weights, each of `--sentences` different sources translated alone.

benchmarks/decode.py times one batch of identical-length sources with EOS suppressed (every system
makes exactly `--new-tokens` steps); with `--sentences 1` that batch is one sentence, repeated. This
script asks what one-sentence figures hold without those choices, and which of them move the ratio:

- the sources differ (lengths `--min-len`..`--max-len`) and so do the outputs: a random model
  rarely chooses EOS, so each output has its source's length plus `--extra` tokens, the cap set
  per call (`--forced-length N`: every output N tokens, as decode.py);
- CTranslate2 is called as a user calls it (`translate_batch([tokens], beam_size=b)`, its
  defaults) and as decode.py calls it (`return_scores=True`, `min_decoding_length`,
  `max_batch_size`): both rows are printed;
- each system runs in its own process and the systems take turns with `--pause` seconds between
  them: an OpenMP runtime keeps its threads spinning after a parallel region (Intel's, which
  CTranslate2's wheels bundle, for 200 ms by default), and on a 2-core machine a neighbour's
  spinning threads slow whoever runs next.

Reported: milliseconds per sentence (best of `--repeats` passes over all sentences), output tokens
per second, and aiayn's speed ratio against each CTranslate2 row (> 1: aiayn is faster).

    python benchmarks/one_sentence.py [--base] [--threads 2] [--sentences 32] [--forced-length 0]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import tempfile
import time
from pathlib import Path

import torch

from aiayn.config import DecodeConfig
from aiayn.decode.generate import decode_batch
from aiayn.runtime.linear import pack_for_inference
from aiayn.runtime.native_step import attach_native_decoder
from decode import EOS, build_models, convert_for_ctranslate2, ct2_names  # benchmarks/
from workers import stop_workers

CT2_CALLS = {
    "CTranslate2 (defaults)": {},
    "CTranslate2 (as decode.py)": {"return_scores": True, "min_decoding_length": True, "max_batch_size": 1},
}


def sources(args: argparse.Namespace, vocab: int) -> list[list[int]]:
    """`--sentences` random sources of random lengths, EOS last."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(args.min_len, args.max_len + 1, (args.sentences,), generator=g)
    return [torch.randint(2, vocab - 1, (int(n) - 1,), generator=g).tolist() + [EOS] for n in lengths]


def cap(args: argparse.Namespace, src: list[int]) -> int:
    """The most output tokens (EOS not counted) for `src`: its length plus --extra, or --forced-length."""
    return args.forced_length or len(src) + args.extra


def aiayn_system(args: argparse.Namespace, srcs: list[list[int]]):
    _, model = build_models("base" if args.base else "tiny", "cpu", suppress_eos=args.forced_length > 0)
    pack_for_inference(model)
    print(f"aiayn native decoding step: {attach_native_decoder(model)}", flush=True)

    def translate(beam: int) -> list[list[int]]:
        out = []
        for src in srcs:
            options = DecodeConfig(
                beam_size=beam, alpha=args.alpha, length_penalty_style="len", max_len_a=0.0,
                max_len_b=cap(args, src),
            )  # fmt: skip
            out.append(decode_batch(model, torch.tensor([src]), options)[0][0].tokens)
        return out

    return translate


def ct2_system(args: argparse.Namespace, srcs: list[list[int]], ct2_dir: Path, call: dict):
    import ctranslate2

    names = ct2_names(args.vocab_size)
    ids = {name: i for i, name in enumerate(names)}
    texts = [[names[i] for i in src] for src in srcs]
    translator = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=args.threads)
    extra = dict(call)
    if extra.pop("min_decoding_length", False) and args.forced_length:
        extra["min_decoding_length"] = args.forced_length

    def translate(beam: int) -> list[list[int]]:
        out = []
        for src, text in zip(srcs, texts, strict=True):
            (result,) = translator.translate_batch(
                [text], beam_size=beam, length_penalty=args.alpha, max_decoding_length=cap(args, src), **extra
            )
            out.append([ids[t] for t in result.hypotheses[0]])
        return out

    return translate


def worker(conn, system: str, args: argparse.Namespace, ct2_dir: Path | None) -> None:
    """Build one system, then answer ("run", beam) with (seconds, outputs) until ("stop",)."""
    torch.set_num_threads(args.threads)
    srcs = sources(args, args.vocab_size)
    if system == "aiayn":
        translate = aiayn_system(args, srcs)
    else:
        translate = ct2_system(args, srcs, ct2_dir, CT2_CALLS[system])
    conn.send("ready")
    while (command := conn.recv())[0] == "run":
        start = time.perf_counter()
        out = translate(command[1])
        conn.send((time.perf_counter() - start, out))


def time_systems(args: argparse.Namespace, ct2_dir: Path) -> dict:
    """{beam: ({system: best seconds}, {system: outputs})}, the systems in turn, `--pause` apart."""
    systems = ["aiayn", *CT2_CALLS]
    ctx, workers = mp.get_context("spawn"), {}
    try:
        for system in systems:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker, args=(child, system, args, ct2_dir))
            proc.start()
            child.close()
            workers[system] = (proc, parent)
            parent.recv()
        results = {}
        for beam in (4, 1):
            seconds, outputs = {s: float("inf") for s in systems}, {}
            for _ in range(args.repeats + 1):  # the first pass warms up and counts too: best of all
                for system, (_, conn) in workers.items():
                    time.sleep(args.pause)
                    conn.send(("run", beam))
                    took, outputs[system] = conn.recv()
                    seconds[system] = min(seconds[system], took)
            results[beam] = seconds, outputs
        return results
    finally:
        stop_workers(workers)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", action="store_true", help="the base model's size instead of tiny's")
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=40)
    p.add_argument("--extra", type=int, default=8, help="output tokens beyond the source's length")
    p.add_argument("--forced-length", type=int, default=0, help="suppress EOS and make this many steps")
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pause", type=float, default=1.0, help="seconds between two systems' turns")
    args = p.parse_args()
    hf, model = build_models("base" if args.base else "tiny", "cpu", suppress_eos=args.forced_length > 0)
    args.vocab_size = model.config.vocab_size
    with tempfile.TemporaryDirectory() as tmp:
        ct2_dir = convert_for_ctranslate2(hf, Path(tmp))
        if ct2_dir is None:
            raise SystemExit("CTranslate2 is not installed (pip install ctranslate2)")
        del hf, model
        print(f"{platform.machine()}, torch {torch.__version__}, {args.threads} threads: "
              f"{args.sentences} sentences of {args.min_len}-{args.max_len} tokens, one a call, "
              f"pause {args.pause} s")  # fmt: skip
        results = time_systems(args, ct2_dir)
    for beam, (seconds, outputs) in results.items():
        name = "greedy" if beam == 1 else f"beam {beam}"
        for system, took in seconds.items():
            tokens = sum(len(o) for o in outputs[system])
            print(f"{name:7s} {system:27s} {1000 * took / args.sentences:7.2f} ms/sentence "
                  f"{tokens / took:8.0f} tok/s")  # fmt: skip
        for system in CT2_CALLS:
            same = sum(a == b for a, b in zip(outputs["aiayn"], outputs[system], strict=True))
            print(f"{'':7s} aiayn / {system}: {seconds[system] / seconds['aiayn']:.2f}x "
                  f"(same outputs {same}/{args.sentences})")  # fmt: skip


if __name__ == "__main__":
    main()
