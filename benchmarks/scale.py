"""WMT scale on this machine: `aiayn prepare` of a synthetic news-like corpus, the time to the
first update of a run on it, and a long translation job.

The corpus: `--pairs` pairs (each size of the comma-separated list), 30,000 Zipfian word types a
side (exponent 1.1), sentence lengths drawn around 25 words (gamma, shape 2.5) and cut at 220, the
target's length the source's +-20%: the shape of WMT14 en-de's training text. Written once into
--out and reused.

Reported per size:

    prepare      wall seconds, the command's peak RSS (its own process and the SentencePiece
                 trainer's threads), the data directory's size on disk
    first update wall seconds from `aiayn train --preset tiny --max-steps 1` starting to its exit
                 (set-up, one update, one checkpoint), then the same for a resume to step 2 (what
                 every restart pays); and of each, the set-up: the seconds outside the training loop
                 (the wall time less the loop's own `elapsed_s`; imports, data, model, optimizer,
                 and the checkpoint write and exit after the update)

With `--model MODEL_DIR`, a translation job of `--lines` lines (the synthetic sources, or
`--texts` tiled) through `aiayn translate -i -o` (a job in parts): lines/s and peak RSS.

    python benchmarks/scale.py [--pairs 1000000,4500000] [--workers N] [--out runs/scale]
                               [--model MODEL_DIR [--texts F] [--lines 100000]]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TYPES, EXPONENT, MEAN_WORDS, MAX_WORDS = 30_000, 1.1, 25, 220
CHUNK = 100_000  # sentences generated and written at a time


def _words(rng: np.random.Generator, count: int, types: int) -> np.ndarray:
    """`count` word ids of a Zipfian vocabulary of `types` types (ranks 0..types-1)."""
    ranks = rng.zipf(EXPONENT, size=2 * count + 1000) - 1
    ranks = ranks[ranks < types]
    while len(ranks) < count:  # rare: too many draws past the vocabulary
        ranks = np.concatenate([ranks, _words(rng, count - len(ranks), types)])
    return ranks[:count]


def _side(rng: np.random.Generator, lengths: np.ndarray, vocab: np.ndarray) -> list[str]:
    words = vocab[_words(rng, int(lengths.sum()), len(vocab))]
    ends = np.cumsum(lengths)
    return [" ".join(words[end - n : end]) for n, end in zip(lengths.tolist(), ends.tolist(), strict=True)]


def write_corpus(prefix: Path, pairs: int, seed: int = 1, vocab: tuple | None = None) -> tuple[Path, Path]:
    """prefix.src / prefix.tgt with `pairs` synthetic pairs (reused when complete); `vocab`: each
    side's word types, most frequent first (default: TYPES pseudo-words a side, s0.. and t0..)."""
    src, tgt, done = prefix.with_suffix(".src"), prefix.with_suffix(".tgt"), prefix.with_suffix(".done")
    if done.exists():
        return src, tgt
    rng = np.random.default_rng(seed)
    pseudo = [f"s{k}" for k in range(TYPES)], [f"t{k}" for k in range(TYPES)]
    vocab_src, vocab_tgt = (np.array(words, dtype=object) for words in vocab or pseudo)
    with open(src, "w", encoding="utf-8") as fs, open(tgt, "w", encoding="utf-8") as ft:
        for start in range(0, pairs, CHUNK):
            n = min(CHUNK, pairs - start)
            src_len = np.clip(np.rint(rng.gamma(2.5, MEAN_WORDS / 2.5, n)), 1, MAX_WORDS).astype(np.int64)
            tgt_len = np.clip(np.rint(src_len * rng.uniform(0.8, 1.2, n)), 1, MAX_WORDS).astype(np.int64)
            fs.write("\n".join(_side(rng, src_len, vocab_src)) + "\n")
            ft.write("\n".join(_side(rng, tgt_len, vocab_tgt)) + "\n")
    done.touch()
    return src, tgt


def timed(command: list[str], log: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one command in its own process (`measured`)."""
    run = measured(command, log)
    return run["wall_s"], run["rss_mb"]


def measured(command: list[str], log: Path) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS in MB of one command in its own process
    (os.wait4's rusage: the process itself, its threads included); its output into `log`; a failure
    ends the benchmark."""
    began = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({log}):\n{log.read_text()[-2000:]}")
    return {"wall_s": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def aiayn(*args: str) -> list[str]:
    return [sys.executable, "-m", "aiayn", *args]


def one_size(out: Path, pairs: int, workers: int | None) -> dict:
    prefix = out / f"corpus-{pairs}"
    began = time.perf_counter()
    src, tgt = write_corpus(prefix, pairs)
    print(f"{pairs:,} pairs: corpus ready in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    data, run = out / f"data-{pairs}", out / f"run-{pairs}"
    prepare = ["prepare", "--src", str(src), "--tgt", str(tgt), "--out", str(data), "--force"]
    prepare += ["--no-progress"]
    prepare += ["--workers", str(workers)] if workers else []
    seconds, rss = timed(aiayn(*prepare), out / f"prepare-{pairs}.log")
    row = {"pairs": pairs, "prepare_s": seconds, "prepare_rss_mb": rss, "disk_mb": disk_mb(data)}
    train = ["train", str(data), "--out", str(run), "--preset", "tiny", "--device", "cpu", "--no-progress"]
    subprocess.run(["rm", "-rf", str(run)], check=True)
    row["first_update_s"], row["train_rss_mb"] = timed(aiayn(*train, "--max-steps", "1"), out / "train1.log")
    row["first_setup_s"] = row["first_update_s"] - _loop_seconds(run)
    row["resume_update_s"], _ = timed(aiayn(*train, "--max-steps", "2"), out / "train2.log")
    row["resume_setup_s"] = row["resume_update_s"] - _loop_seconds(run)
    return row


def _loop_seconds(run: Path) -> float:
    """The training loop's own seconds in the last invocation (metrics.jsonl's last train row's
    `elapsed_s`: from the loop's start to its update's row)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("kind") == "train"][-1]["elapsed_s"]


def translation(out: Path, model: Path, texts: Path | None, lines: int, corpus: Path | None) -> dict:
    source = texts or corpus
    found = [line for line in source.read_text(encoding="utf-8").splitlines()[:lines] if line.strip()]
    tiled = (found * (-(-lines // len(found))))[:lines]
    big, result = out / f"translate-{lines}.txt", out / f"translate-{lines}.out"
    big.write_text("\n".join(tiled) + "\n", encoding="utf-8")
    subprocess.run(["rm", "-rf", str(result), f"{result}.parts"], check=True)
    command = aiayn("translate", str(model), "-i", str(big), "-o", str(result))
    seconds, rss = timed(command, out / "translate.log")
    return {"lines": lines, "seconds": seconds, "lines_per_s": lines / seconds, "rss_mb": rss}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", default="1000000,4500000", help="comma-separated corpus sizes")
    parser.add_argument("--workers", type=int, help="prepare --workers (default: prepare's own)")
    parser.add_argument("--out", type=Path, default=Path("runs/scale"))
    parser.add_argument("--model", type=Path, help="a model directory for the translation job")
    parser.add_argument("--texts", type=Path, help="sources for the job (default: the synthetic corpus)")
    parser.add_argument("--lines", type=int, default=100_000)
    args = parser.parse_args()
    sizes = [int(float(p)) for p in args.pairs.split(",") if p]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [one_size(args.out, pairs, args.workers) for pairs in sizes]
    print(f"\n{os.cpu_count()} cores; python benchmarks/scale.py --pairs {args.pairs}\n")
    print("| pairs | prepare s | peak RSS MB | on disk MB | first update s (set-up) | resumed (set-up) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['pairs']:,} | {r['prepare_s']:.0f} | {r['prepare_rss_mb']:.0f} | {r['disk_mb']:.0f} "
            f"| {r['first_update_s']:.1f} ({r['first_setup_s']:.1f}) "
            f"| {r['resume_update_s']:.1f} ({r['resume_setup_s']:.1f}) |"
        )
    if args.model:
        if not (args.texts or sizes):
            parser.error("--model needs --texts or a corpus size in --pairs")
        corpus = args.out / f"corpus-{sizes[0]}.src" if sizes else None
        job = translation(args.out, args.model, args.texts, args.lines, corpus)
        print(
            f"\ntranslate -i ({job['lines']:,} lines) -o: {job['seconds']:.0f} s, "
            f"{job['lines_per_s']:.0f} lines/s, peak RSS {job['rss_mb']:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
