"""Two machines on one host: what a two-node `torchrun` run costs against one process.

The same updates three ways, on a prepared data directory (the quickstart's by default), the
quickstart's recipe with two micro-batches an update (`update_tokens` twice `max_tokens`):

    one process   `aiayn train`, `--threads` threads, accumulation 2
    two nodes     two torchrun agents (`--nnodes 2`, c10d rendezvous on localhost, gloo), one rank
                  each with `--threads / 2` threads (the host's cores shared): accumulation 1 each

Reported: each run's wall seconds (command start to exit, set-up included), the loop's seconds per
update after the first `--warm` updates, and the mean train loss of the last `--warm` updates
(metrics.jsonl). The two see the same batches in each update but draw their own dropout masks (each
rank its own), so their losses agree to training noise, not to the bit; the equalities are the
tests' (tests/train/test_distributed.py without dropout, tests/scenarios/test_elastic.py across a
lost node).

    python benchmarks/two_nodes.py [--data runs/quickstart/data] [--steps 40] [--warm 10]
                                   [--threads 2] [--out runs/two_nodes]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recipe(out: Path, steps: int) -> Path:
    """The quickstart's recipe with two micro-batches an update, a log row every update, no dev
    evaluation."""
    body = yaml.safe_load(QUICKSTART.read_text())
    train = body["train"]
    train.update(update_tokens=2 * train["update_tokens"], max_tokens=train["update_tokens"])
    train.update(max_steps=steps, log_every=1, eval_every=10 * steps, save_every=steps)
    path = out / "recipe.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def train_args(data: Path, run: Path, config: Path) -> list[str]:
    args = ["train", str(data), "--out", str(run), "--config", str(config)]
    return [*args, "--no-progress", "--device", "cpu"]


def one_process(data: Path, run: Path, config: Path, threads: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "aiayn", *train_args(data, run, config)], env=env, check=True)
    return time.perf_counter() - began


def two_nodes(data: Path, run: Path, config: Path, threads: int) -> float:
    """Two torchrun agents of one rank each, the first hosting the rendezvous; wall seconds."""
    port = free_port()
    head = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"]
    rdzv = ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=two-nodes"]
    tail = ["--local_addr=127.0.0.1", "--max_restarts=0", "-m", "aiayn", *train_args(data, run, config)]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(threads // 2, 1))}
    began = time.perf_counter()
    agents = [
        subprocess.Popen([*head, *rdzv, f"--rdzv_conf=is_host={host}", *tail], env=env) for host in (1, 0)
    ]
    codes = [agent.wait() for agent in agents]
    if codes != [0, 0]:
        raise SystemExit(f"the two nodes exited with {codes}")
    return time.perf_counter() - began


def summary(run: Path, warm: int) -> tuple[float, float]:
    """(the loop's mean seconds per update after the first `warm` updates, the mean train loss of
    the last `warm` updates)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = {r["step"]: r for r in rows if r.get("kind") == "train"}
    last = max(train)
    per_update = (train[last]["elapsed_s"] - train[warm]["elapsed_s"]) / (last - warm)
    return per_update, sum(train[last - k]["loss"] for k in range(warm)) / warm


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "runs" / "quickstart" / "data")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warm", type=int, default=10, help="updates left out of the timing; the loss's window")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "two_nodes")
    args = p.parse_args()
    if not (args.data / "meta.json").is_file():
        raise SystemExit(f"{args.data}: not a prepared data directory (run `aiayn quickstart` or prepare)")
    args.out.mkdir(parents=True, exist_ok=True)
    config = recipe(args.out, args.steps)
    runs = {"one process": args.out / "one", "two nodes": args.out / "two"}
    for run in runs.values():
        subprocess.run(["rm", "-rf", str(run)], check=True)
    wall = {
        "one process": one_process(args.data, runs["one process"], config, args.threads),
        "two nodes": two_nodes(args.data, runs["two nodes"], config, args.threads),
    }
    print(f"\n{args.steps} updates of {args.data}, {args.threads} threads in all")
    print(f"{'':<12} {'wall s':>7} {'s/update':>9} {'last loss':>9}")
    for name, run in runs.items():
        per_update, loss = summary(run, args.warm)
        print(f"{name:<12} {wall[name]:>7.1f} {per_update:>9.3f} {loss:>9.3f}")
    print(" ".join(["python", *sys.argv]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
