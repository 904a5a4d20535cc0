"""What int8 inference costs in translation quality: BLEU and chrF of a trained model in float32 and
with `--int8` (aiayn.runtime.quantize), on the same test set, with the same beam search.

It runs `aiayn evaluate MODEL_DIR DATA_DIR --split test` twice in this process, without and with
int8 (CPU, beam 4, alpha 0.6), writes nothing into the model directory, and reports both scores,
the BLEU drop (the target: at most 0.5) and how many sentences came out exactly the same. By
default it reads the quickstart's run (`make demo`: runs/quickstart/model and runs/quickstart/data)
and exits quietly when that is not there.

    python benchmarks/int8_bleu.py [--run runs/quickstart | --model MODEL_DIR --data DATA_DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from aiayn.config import DecodeConfig
from aiayn.evaluate import evaluate_model

MAX_DROP = 0.5  # BLEU points


def evaluate(model: Path, data: Path, split: str, limit: int | None, int8: bool, out: Path) -> dict:
    start = time.perf_counter()
    scores = evaluate_model(
        model, data, split, DecodeConfig(), out_dir=out, device="cpu", limit=limit, int8=int8
    )
    scores["seconds"] = round(time.perf_counter() - start, 1)
    scores["lines"] = Path(scores["hypotheses"]).read_text(encoding="utf-8").splitlines()
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=Path("runs/quickstart"), help="RUN/model, RUN/data")
    parser.add_argument("--model", type=Path, help="a model directory (default: RUN/model)")
    parser.add_argument("--data", type=Path, help="a prepared data directory (default: RUN/data)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the result rows here (for run_all.py)")
    args = parser.parse_args(argv)
    model, data = args.model or args.run / "model", args.data or args.run / "data"
    if not (model / "config.json").is_file() or not (data / "raw" / f"{args.split}.src").is_file():
        print(f"no trained model and data at {model} and {data} (run `make demo` first): skipped")
        return 0
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = evaluate(model, data, args.split, args.limit, False, Path(tmp) / "fp32")
        int8 = evaluate(model, data, args.split, args.limit, True, Path(tmp) / "int8")
    same = sum(a == b for a, b in zip(fp32["lines"], int8["lines"], strict=True))
    n, drop = len(fp32["lines"]), fp32["bleu"] - int8["bleu"]
    print(f"{model} on {data} ({args.split}, {n} sentences), beam 4, CPU, {args.threads} threads")
    for name, s in (("float32", fp32), ("int8", int8)):
        print(f"{name:8s} {s['bleu_text']}\n{'':8s} {s['chrf_text']}\n{'':8s} translated in {s['seconds']} s")
    print(f"BLEU drop {drop:.2f} (target <= {MAX_DROP}); identical translations {same}/{n} ({same / n:.0%})")
    if args.json:
        rows = [
            dict(
                measure=f"int8 BLEU drop, {args.split}", aiayn=drop, peer="target", peer_value=MAX_DROP,
                ratio=drop / MAX_DROP, target=1.0, higher_is_better=False,
            )
        ]  # fmt: skip
        results = {
            "fp32": {k: fp32[k] for k in ("bleu", "chrf", "seconds")},
            "int8": {k: int8[k] for k in ("bleu", "chrf", "seconds")},
            "identical": same,
            "sentences": n,
        }
        args.json.write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
