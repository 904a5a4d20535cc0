"""Transfer learning: a trained model continued on a small corpus vs training from scratch.

The base model is a Spanish -> English translator trained on the Bible (`aiayn quickstart`); the
target is a few thousand pairs of Spanish -> English LibreOffice help text, a domain the Bible never
saw (menus, keys, spreadsheets). Every run has the same data directory, prepared with the base
model's own SentencePiece model (`prepare --spm`, which `train --init-from` requires), the same
`configs/tiny.yaml` recipe, the same number of updates, the same seed, the same checkpoint averaging
(the last 5, saved every 25 steps) and the same beam search (beam 4, alpha 0.6) on the same test
split. What differs is the starting point, and for one fine-tuning row the warm-up (50 steps instead
of 200: Adam starts with empty moment estimates, but the weights need no long warm-up to settle).
The base model without any fine-tuning is scored as well, and a scratch run with twice the updates
shows what the head start is worth in training time.

Each step is an `aiayn` command, printed before it runs; a run whose scores exist is not run again.

    python benchmarks/transfer.py --base runs/quickstart/model [--out runs/transfer] [--steps 300]
        [--train-pairs 3000] [--threads 1] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "tiny.yaml"
CORPUS = "libreoffice-es-en"
# every run: a step budget only, a checkpoint every 25 steps (the last 5 are averaged), dev loss every 100
SETTINGS = ("minutes=null", "save_minutes=null", "save_every=25", "eval_every=100")


def aiayn(*args: str, env: dict[str, str]) -> None:
    """Run one `aiayn` command (printed first); a failure stops the benchmark."""
    print("$ aiayn " + shlex.join(args), flush=True)
    subprocess.run([sys.executable, "-m", "aiayn", *args], check=True, env=env)


def train_args(data: Path, run: Path, steps: int) -> list[str]:
    """The `aiayn train` arguments that every run shares."""
    sets = [arg for setting in SETTINGS for arg in ("--set", setting)]
    config = os.path.relpath(CONFIG)
    return ["train", str(data), "--out", str(run), "--config", config, "--max-steps", str(steps)] + [
        "--seed", "1", *sets, "--no-progress"
    ]  # fmt: skip


def run_summary(run: Path) -> dict:
    """Training minutes, the first logged loss and the last dev losses, from a run's metrics.jsonl."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    dev = [r for r in rows if r["kind"] == "dev"]
    seconds = [r["elapsed_s"] for r in train]  # counted from each invocation's start (a resume restarts it)
    restarts = [a for a, b in zip(seconds, seconds[1:], strict=False) if b < a]
    return {
        "steps": train[-1]["step"],
        "minutes": (sum(restarts) + seconds[-1]) / 60,
        "first_loss": train[0]["loss"],
        "dev_loss": dev[-1]["dev_loss"] if dev else None,
        "dev_loss_shuffled": dev[-1]["dev_loss_shuffled"] if dev else None,
    }


def evaluate(model: Path, data: Path, out: Path, env: dict[str, str]) -> dict:
    """`aiayn evaluate` on the test split with beam 4, unless its scores.json is there already."""
    if not (out / "scores.json").is_file():
        args = ["--split", "test", "--beam", "4", "--out", str(out), "--no-progress"]
        aiayn("evaluate", str(model), str(data), *args, env=env)
    return json.loads((out / "scores.json").read_text())


def print_table(rows: list[dict]) -> None:
    print("\n| start | warm-up | steps | minutes | first loss | dev loss (shuffled) | test BLEU | chrF |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        minutes = f"{r['minutes']:.1f}" if "minutes" in r else "-"
        first = f"{r['first_loss']:.2f}" if "first_loss" in r else "-"
        dev = f"{r['dev_loss']:.2f} ({r['dev_loss_shuffled']:.2f})" if r.get("dev_loss") else "-"
        cells = [r["start"], r["warmup"] or "-", r.get("steps", 0), minutes, first, dev]
        print("| " + " | ".join(map(str, cells)) + f" | {r['bleu']:.2f} | {r['chrf']:.2f} |")
    print(f"\n{rows[0]['bleu_signature']}; {rows[0]['n_sentences']} test sentences of {CORPUS}")


def init_from(base: Path) -> list[str]:
    """--init-from BASE, the decoder starting where BASE's does (a model from before the zero start: <s>)."""
    from aiayn.model.io import read_config

    start = read_config(base)[0].decoder_start_id
    return ["--init-from", str(base), "--set", f"decoder_start_id={'null' if start is None else start}"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, help="the trained model directory to start from")
    parser.add_argument("--out", default="runs/transfer", help="prefix of the directories written")
    parser.add_argument("--steps", type=int, default=300, help="updates of every run (default 300)")
    parser.add_argument("--train-pairs", type=int, default=3000, help="target train pairs (default 3000)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    parser.add_argument("--json", help="write the table's rows here")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    base, data = Path(args.base), Path(f"{args.out}_data")
    sample = ["--spm", str(base), "--train-limit", str(args.train_pairs)]
    aiayn("prepare", "--corpus", CORPUS, *sample, "--out", str(data), "--no-progress", env=env)

    scores = evaluate(base, data, Path(f"{args.out}_base_eval"), env)
    rows = [{"start": f"{base}, not fine-tuned", "warmup": None, **scores}]
    runs = [  # (directory suffix, start point, warm-up steps, budget in --steps, extra arguments)
        ("scratch", "random (from scratch)", 200, 1, []),
        ("scratch_x2", "random (from scratch)", 200, 2, []),
        ("bible", str(base), 200, 1, init_from(base)),
        ("bible_w50", str(base), 50, 1, [*init_from(base), "--set", "warmup_steps=50"]),
    ]
    for name, start, warmup, budget, extra in runs:
        run = Path(f"{args.out}_{name}")
        if not (run / "model" / "eval" / "scores.json").is_file():
            aiayn(*train_args(data, run, budget * args.steps), *extra, env=env)
            aiayn("average", str(run), "--last", "5", env=env)
        scores = evaluate(run / "model", data, run / "model" / "eval", env)
        rows.append({"start": start, "warmup": warmup, **run_summary(run), **scores})
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
