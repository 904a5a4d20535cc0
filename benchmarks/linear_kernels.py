"""What each matrix-product kernel costs at decoding's row counts, and what choosing among them
costs at load: the evidence for `aiayn.runtime.linear.pack_for_inference`.

For each weight shape of the tiny and base presets (in x out) and 1, 4, 32 and 128 rows, the
microseconds of MKL's `F.linear`, oneDNN with the weight packed once (`PackedLinear`), and oneDNN
unpacked (`linear`, which reorders the weight on every call); best of 30 calls after 3 untimed.
Then the seconds `pack_for_inference` takes on a tiny and a base model and the kernels it chose.

    python benchmarks/linear_kernels.py [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from aiayn.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.runtime.linear import ROW_PROBES, PackedLinear, linear, pack_for_inference

SHAPES = [(256, 256), (256, 1024), (1024, 256), (256, 8000)]  # tiny's (in x out)
SHAPES += [(512, 512), (512, 2048), (2048, 512), (512, 32000)]  # base's


def best_us(fn, calls: int = 30) -> float:
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def shape_row(k: int, n: int) -> str:
    """One table row: MKL / packed / unpacked oneDNN microseconds at each of ROW_PROBES rows."""
    w, b = torch.randn(n, k), torch.randn(n)
    layer = PackedLinear(w, b, ("packed",) * len(ROW_PROBES))
    cells = []
    with torch.inference_mode():
        for rows in ROW_PROBES:
            x = torch.randn(rows, k)
            mkl = best_us(lambda: F.linear(x, w, b))  # noqa: B023 (called at once)
            packed = best_us(lambda: layer.packed_product(x, rows))  # noqa: B023
            unpacked = best_us(lambda: linear(x, w, b))  # noqa: B023
            cells.append(f"{mkl:,.0f} / {packed:,.0f} / {unpacked:,.0f}")
    return f"{k} x {n} | " + " | ".join(cells)


def load_cost(preset: str, vocab: int) -> str:
    model = Transformer(ModelConfig.preset(preset, vocab_size=vocab)).eval()
    start = time.perf_counter()
    pack_for_inference(model)
    seconds = time.perf_counter() - start
    layers = [m for m in model.modules() if isinstance(m, PackedLinear)]
    chosen = {f"{m.in_features} x {m.out_features}": m.kernels for m in layers}
    return f"{preset}: pack_for_inference {seconds:.2f} s; kernels at {ROW_PROBES} rows: {chosen}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print("in x out | " + " | ".join(f"{r} rows: MKL / packed / unpacked oneDNN (us)" for r in ROW_PROBES))
    for k, n in SHAPES:
        print(shape_row(k, n))
    for preset, vocab in (("tiny", 8000), ("base", 32000)):
        print(load_cost(preset, vocab))


if __name__ == "__main__":
    main()
